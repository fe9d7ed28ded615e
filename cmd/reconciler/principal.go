package main

import (
	"os"
	"os/user"
	"strconv"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// localPrefix starts the principal of every offline action: one taken
// with --dsn, straight on the database, which no API token authenticated.
const localPrefix = "local:"

// localPrincipal is who an offline (--dsn) action is recorded as, the one
// principal of every --dsn command that records one (approvals,
// force-deploys, catalog and workflow approvals, control intents, job
// cancellations, policies published by apply): local:<operating-system
// user>, that is $USER, else the account of the process's uid, else
// uid-N.
func localPrincipal() string {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" || release.CheckControl("USER", name) != nil {
		name = "uid-" + strconv.Itoa(os.Getuid())
	}
	return localPrefix + name
}
