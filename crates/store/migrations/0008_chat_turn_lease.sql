-- Team mode, step 8: one turn at a time in a conversation, across instances. The
-- instance running a turn holds a lease (`turn_holder`, until `turn_until`, unix
-- seconds) and renews it while the turn runs; a second send on any instance is refused
-- while it is held, and a lease left by a killed instance runs out.

ALTER TABLE conversations ADD COLUMN turn_holder TEXT;
ALTER TABLE conversations ADD COLUMN turn_until BIGINT;
