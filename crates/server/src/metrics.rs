//! Prometheus metrics. The `metrics` facade has one process-wide recorder, so it is installed
//! once here and every service in the process (tests start several) shares it.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The handle that renders `/metrics`, installing the recorder on first use.
pub fn handle() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed by an embedding program; the handle
            // then renders only what reaches ours, which is still a valid (empty) exposition.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}
