-- The shared state of gateway replicas: approval requests (with the grants,
-- consents and revocations they carry), their audit log, the last accepted
-- table (the rollback high-water mark) and what each replica serves.

-- +goose Up
CREATE TABLE approval_requests (
    id         text PRIMARY KEY,
    kind       text NOT NULL,
    status     text NOT NULL,
    principal  text NOT NULL,
    -- fold is a keyed hash of kind, principal, server, tool or URI and the
    -- arguments' fingerprint: what identical requests fold by.
    fold       text NOT NULL,
    -- once is set for an approval once; ran is what became of it.
    once       boolean NOT NULL DEFAULT false,
    ran        text NOT NULL DEFAULT '',
    expires    timestamptz NOT NULL,
    -- keep_until is when the request may be deleted; NULL keeps it.
    keep_until timestamptz,
    data       jsonb NOT NULL,
    rev        bigint NOT NULL DEFAULT 1,
    updated    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX approval_requests_pending_fold ON approval_requests (fold) WHERE status = 'pending';
CREATE INDEX approval_requests_pending_principal ON approval_requests (principal) WHERE status = 'pending';
CREATE INDEX approval_requests_ready ON approval_requests (fold) WHERE status = 'approved' AND once AND ran = '';
CREATE INDEX approval_requests_updated ON approval_requests (updated);

CREATE TABLE approval_events (
    seq   bigserial PRIMARY KEY,
    time  timestamptz NOT NULL,
    id    text NOT NULL,
    event text NOT NULL,
    data  jsonb NOT NULL
);
CREATE INDEX approval_events_id ON approval_events (id);

-- +goose StatementBegin
CREATE FUNCTION approval_requests_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('policyc_approvals', NEW.id);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER approval_requests_changed AFTER INSERT OR UPDATE ON approval_requests
    FOR EACH ROW EXECUTE FUNCTION approval_requests_notify();

-- state_key holds the key of the fold hash, made once per database.
CREATE TABLE state_key (
    id  integer PRIMARY KEY CHECK (id = 1),
    key bytea NOT NULL
);

CREATE TABLE accepted_table (
    id      integer PRIMARY KEY CHECK (id = 1),
    serial  bigint NOT NULL,
    digest  text NOT NULL,
    content text NOT NULL,
    expires text NOT NULL,
    by      text NOT NULL,
    at      timestamptz NOT NULL
);

CREATE TABLE replicas (
    name    text PRIMARY KEY,
    host    text NOT NULL,
    pid     integer NOT NULL,
    started timestamptz NOT NULL,
    serial  bigint NOT NULL,
    digest  text NOT NULL,
    loaded  timestamptz NOT NULL,
    seen    timestamptz NOT NULL
);

-- +goose Down
DROP TABLE replicas;
DROP TABLE accepted_table;
DROP TABLE state_key;
DROP TABLE approval_events;
DROP TABLE approval_requests;
DROP FUNCTION approval_requests_notify();
