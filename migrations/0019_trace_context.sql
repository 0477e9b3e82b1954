-- Issue 26: the W3C traceparent of the caller that started an instance, kept on its
-- instance_started event so every worker's spans join the caller's trace. NULL for
-- every other event and for starts without a trace (older rows included).

ALTER TABLE history ADD COLUMN trace_context text
    CHECK (trace_context IS NULL OR length(trace_context) = 55);
COMMENT ON COLUMN history.trace_context IS
    'The traceparent of the span that started the instance (instance_started only); not part of replay or fingerprints.';
