-- The secret key's check value: one known text sealed under the key of the first start
-- (`Store::check_keys`). An instance started with another key cannot open it and
-- refuses to start instead of failing every user's request; `db reencrypt` reseals it
-- with the other sealed values.
CREATE TABLE key_check (
    slot TEXT PRIMARY KEY,
    value BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
