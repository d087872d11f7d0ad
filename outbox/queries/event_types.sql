-- The event catalog (webhook_event_types, migration 029): its types, each
-- returned whole, and its one row of state (strict mode, the version that
-- every change of the types bumps). The rules of a type (its name, its
-- schema compiling, its example matching it) are package eventtypes'; the
-- table's constraints check what the database can.

-- name: event_types
-- Every type of the catalog, by name.
SELECT name, description, schema, example, deprecated, created_at, updated_at
FROM webhook_event_types
ORDER BY name;

-- name: event_type_by_name
-- The type named :'name'.
SELECT name, description, schema, example, deprecated, created_at, updated_at
FROM webhook_event_types
WHERE name = :'name';

-- name: add_event_type
-- Adds the type :'name'; a NULL :'schema' or :'example' stores none. A
-- taken name is a unique violation (23505).
INSERT INTO webhook_event_types (name, description, schema, example, deprecated)
VALUES (:'name', :'description', :'schema', :'example', :'deprecated')
RETURNING name, description, schema, example, deprecated, created_at, updated_at;

-- name: update_event_type
-- Writes every field of the type :'name' (the caller read it, changed it
-- and checked it whole).
UPDATE webhook_event_types
SET description = :'description',
  schema = :'schema',
  example = :'example',
  deprecated = :'deprecated'
WHERE name = :'name'
RETURNING name, description, schema, example, deprecated, created_at, updated_at;

-- name: remove_event_type
-- Removes the type :'name', returning it.
DELETE FROM webhook_event_types
WHERE name = :'name'
RETURNING name, description, schema, example, deprecated, created_at, updated_at;

-- name: event_catalog_state
-- Strict mode and the catalog's version: one row of one page, which each
-- worker reads once a second to see whether its catalog is current.
SELECT strict, version
FROM webhook_event_catalog;

-- name: set_event_catalog_strict
-- Turns strict mode on or off (:'strict'); producers' inserts see it at
-- once.
UPDATE webhook_event_catalog
SET strict = :'strict'
RETURNING strict, version;

-- name: event_catalog_summary
-- Strict mode, the version and how many types the catalog lists (worker
-- status).
SELECT c.strict, c.version, (SELECT count(*) FROM webhook_event_types) AS types
FROM webhook_event_catalog c;

-- name: event_type_names
-- The names of the catalog's types (an endpoint's subscription is checked
-- against them).
SELECT name
FROM webhook_event_types;
