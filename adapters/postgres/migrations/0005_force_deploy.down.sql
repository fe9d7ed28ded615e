DROP INDEX IF EXISTS release_policy_skips_force_idx;
