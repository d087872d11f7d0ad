-- Operator events (migration 025, docs/operator-events.md): the
-- statements that write them besides the record (record.sql, steps dead
-- and endpoints) and webhook_endpoint_disable. Each runs in the
-- transaction of the change that causes its event.

-- name: console_setting
-- Sets fluxora.console_url for the transaction to :'console_url' (''
-- none), the base URL webhook_endpoint_disable writes into
-- fluxora.endpoint.disabled: that function's signature is the one older
-- workers call, so the URL comes as a setting, not an argument.
SELECT set_config('fluxora.console_url', :'console_url', true) AS console_url;

-- name: endpoint_enabled
-- Writes fluxora.endpoint.enabled about the endpoint :'id', which the
-- transaction has just enabled, if anyone subscribes to it; returns the
-- event's delivery_id (NULL: none written).
SELECT webhook_operator_event('fluxora.endpoint.enabled', :'id'::uuid,
    jsonb_build_object('console_url', nullif(:'console_url', ''))) AS delivery_id;

-- name: certificates_expiring
-- Writes fluxora.endpoint.certificate_expiring about each enabled endpoint
-- whose client certificate expires within 14 days (or has expired), at
-- most once a day each (certificate_noted_at, set in the same statement),
-- when anyone subscribes to it; returns how many were written. Several
-- workers' janitors may run it at once: the row lock and the re-check of
-- certificate_noted_at let one write each.
WITH due AS (
  UPDATE webhook_endpoints
  SET certificate_noted_at = now()
  WHERE enabled
    AND client_cert_not_after < now() + interval '14 days'
    AND (certificate_noted_at IS NULL OR certificate_noted_at < now() - interval '1 day')
    AND webhook_operator_wanted('fluxora.endpoint.certificate_expiring', id)
  RETURNING id, client_cert_not_after
)
SELECT count(webhook_operator_event('fluxora.endpoint.certificate_expiring', id,
    jsonb_build_object('not_after', webhook_operator_time(client_cert_not_after), 'console_url', nullif(:'console_url', ''))))
  AS written
FROM due;
