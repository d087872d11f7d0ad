package insert

// CatalogSQL reads the event catalog in one row, for the producer kit
// (producer.LoadCatalog): strict mode, the catalog's version, and a JSON
// array of the types, each its name and its schema (null: any JSON).
const CatalogSQL = `SELECT c.strict, c.version, coalesce((SELECT json_agg(json_build_object('name', t.name, 'schema', t.schema))
  FROM webhook_event_types t), '[]')::text
FROM webhook_event_catalog c`
