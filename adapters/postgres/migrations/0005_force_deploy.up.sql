-- Force-deploy skips (rule_id "*") are read on every desired-release pass
-- (ports.TargetFacts.Forced); this index keeps that read to the few there are.
CREATE INDEX release_policy_skips_force_idx ON release_policy_skips (version_id) WHERE doc->>'rule_id' = '*';
