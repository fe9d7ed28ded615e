-- Policies belong to a workspace: every policy revision's content gains
-- "workspace_id". Which workspace a policy belongs to depends on the
-- release targets its CEL selector matches, which SQL cannot evaluate, so
-- the backfill is Go code run in this migration's transaction right after
-- this file (backfillPolicyWorkspaces in migrate_policies.go): a policy
-- gets the workspace of the targets it matches, and the migration is
-- refused, naming them, when a policy matches targets of several
-- workspaces, or none while the database has other than one workspace.
SELECT 1;
