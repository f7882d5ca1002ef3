//! Jobs over the API, as the job tests drive them: create, read, wait for, list executions.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::{Reply, TestApp, send};

/// `POST /api/v2/job` with `body`.
pub async fn create(app: &TestApp, token: &str, body: Value) -> Reply {
    send(app.request(Method::POST, "/api/v2/job", token).json(&body)).await
}

/// Creates a job (201); its id.
pub async fn created(app: &TestApp, token: &str, body: Value) -> String {
    let job = create(app, token, body).await.expect(201).json();
    job["id_job"].as_str().unwrap().to_string()
}

/// The job `id`.
pub async fn job(app: &TestApp, token: &str, id: &str) -> Value {
    send(app.get(&format!("/api/v2/job/{id}"), token))
        .await
        .expect(200)
        .json()
}

/// Waits (at most `wait`) until `done` holds for the job; returns it.
pub async fn job_until(app: &TestApp, token: &str, id: &str, wait: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let started = tokio::time::Instant::now();
    loop {
        let job = job(app, token, id).await;
        if done(&job) {
            return job;
        }
        assert!(started.elapsed() < wait, "not reached within {wait:?}: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The job's executions (its first 100).
pub async fn executions(app: &TestApp, token: &str, id: &str) -> Vec<Value> {
    let reply = send(app.get(&format!("/api/v2/job/{id}/execution?per-page=100"), token))
        .await
        .expect(200);
    reply.json()["items"].as_array().unwrap().clone()
}
