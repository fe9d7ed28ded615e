// Package envsecret resolves sensitive values from the daemon's own
// environment and files: a release.SecretRef whose Ref is "env:NAME"
// reads the environment variable NAME, "file:/path" reads the file (a
// mounted Kubernetes or Docker secret, trailing newline dropped).
//
// Only names with the configured prefix may be read (by default
// RECONCILER_SECRET_), so a template cannot ask for an arbitrary variable
// of the daemon such as its database DSN; files must lie under the
// configured directories, and a symbolic link there may not lead out of
// its directory. Ciphertext references are not supported here.
//
// Invariants: Only names with the configured prefix (`RECONCILER_SECRET_`)
// and files under the configured directories; errors name the reference,
// never a value; passes `porttest.SecretResolver` with env and with file
// secrets
package envsecret

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// DefaultPrefix is the prefix environment variables must carry.
const DefaultPrefix = "RECONCILER_SECRET_"

// ErrUnresolved is wrapped by every refusal: an unknown scheme, a name
// outside the prefix or directories, a missing variable or file.
var ErrUnresolved = errors.New("secret cannot be resolved")

// Resolver is the environment-and-files ports.SecretResolver.
type Resolver struct {
	// Prefix is what environment variable names must start with; empty
	// means DefaultPrefix.
	Prefix string
	// Dirs are the directories files may be read from; none: no files.
	Dirs []string
	// Getenv reads a variable; nil means os.LookupEnv.
	Getenv func(string) (string, bool)
}

var _ ports.SecretResolver = Resolver{}

// Resolve returns the referenced value. Errors name the reference, never
// a value.
func (r Resolver) Resolve(_ context.Context, ref release.SecretRef) (string, error) {
	scheme, name, ok := strings.Cut(ref.Ref, ":")
	switch {
	case ref.Ref == "" && ref.Ciphertext != "":
		return "", fmt.Errorf("secret: ciphertext references need a decrypting resolver: %w", ErrUnresolved)
	case !ok || name == "":
		return "", fmt.Errorf("secret %q: want env:NAME or file:/path: %w", ref.Ref, ErrUnresolved)
	case scheme == "env":
		return r.env(name)
	case scheme == "file":
		return r.file(name)
	}
	return "", fmt.Errorf("secret %q: unknown scheme %q (want env or file): %w", ref.Ref, scheme, ErrUnresolved)
}

func (r Resolver) env(name string) (string, error) {
	prefix := r.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasPrefix(name, prefix) {
		return "", fmt.Errorf("secret env:%s: only variables named %s* may be read: %w", name, prefix, ErrUnresolved)
	}
	get := r.Getenv
	if get == nil {
		get = os.LookupEnv
	}
	v, ok := get(name)
	if !ok {
		return "", fmt.Errorf("secret env:%s: not set: %w", name, ErrUnresolved)
	}
	return v, nil
}

// maxFileBytes bounds a secret file.
const maxFileBytes = 1 << 20

// file reads path through the configured directory it lies under, as an
// os.Root: a symbolic link that stays inside that directory is followed
// (Kubernetes mounts secrets as links into ..data), one that leads out of
// it (or a ".." that does) is refused, with no window between the check
// and the read.
func (r Resolver) file(path string) (string, error) {
	clean := filepath.Clean(path)
	if !filepath.IsAbs(clean) {
		return "", fmt.Errorf("secret file:%s: not under a configured secret directory: %w", path, ErrUnresolved)
	}
	for _, d := range r.Dirs {
		rel, err := filepath.Rel(filepath.Clean(d), clean)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		root, err := os.OpenRoot(d)
		if err != nil {
			return "", fmt.Errorf("secret file:%s: secret directory: %w: %w", path, ErrUnresolved, errors.Unwrap(err))
		}
		defer root.Close()
		f, err := root.Open(rel)
		if err != nil {
			return "", fmt.Errorf("secret file:%s: %w: %w", path, ErrUnresolved, unwrapPath(err))
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
		switch {
		case err != nil:
			return "", fmt.Errorf("secret file:%s: %w: %w", path, ErrUnresolved, unwrapPath(err))
		case len(b) > maxFileBytes:
			return "", fmt.Errorf("secret file:%s: larger than %d bytes: %w", path, maxFileBytes, ErrUnresolved)
		}
		return strings.TrimSuffix(string(b), "\n"), nil
	}
	return "", fmt.Errorf("secret file:%s: not under a configured secret directory: %w", path, ErrUnresolved)
}

// unwrapPath is the cause of a *fs.PathError (its path is already named).
func unwrapPath(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}
