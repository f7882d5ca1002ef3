//! Gateways for a fleet, provisioned through the REST API (docs/api.md, "Management endpoints")
//! with a bearer token of a manager (or an administrator, who may also create the group).

use devicecloud_protocol::ModuleKind;
use serde_json::{Value, json};

use crate::spec::{GatewaySpec, SimulatorError};

/// A REST API client for provisioning.
#[derive(Debug, Clone)]
pub struct Provisioner {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Provisioner {
    /// `base` is the API's address (`http://127.0.0.1:8080`), `token` a bearer token.
    pub fn new(base: &str, token: &str) -> Provisioner {
        Provisioner {
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
        }
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, SimulatorError> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// The JSON answer of `method path` (with `body`), or why not.
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Result<Value, SimulatorError> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        self.answer(&format!("{method} {path}"), request).await
    }

    /// The JSON answer to `request` (named `what` in errors), or why not.
    async fn answer(&self, what: &str, request: reqwest::RequestBuilder) -> Result<Value, SimulatorError> {
        let response = request.send().await.map_err(|e| SimulatorError::Api(e.to_string()))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| SimulatorError::Api(e.to_string()))?;
        if !status.is_success() {
            return Err(SimulatorError::Api(format!("{what}: {status}: {text}")));
        }
        serde_json::from_str(&text).map_err(|e| SimulatorError::Api(format!("{what}: {e}")))
    }

    /// Where this fleet's gateways get firmware: the service's HTTP endpoint and its signing
    /// key (`GET /api/v2/firmware/public-key`), with `fail_percent` of updates made to fail.
    pub async fn firmware_source(&self, fail_percent: u8) -> Result<crate::firmware::FirmwareSource, SimulatorError> {
        let body = self
            .call(reqwest::Method::GET, "/api/v2/firmware/public-key", None)
            .await?;
        Ok(crate::firmware::FirmwareSource {
            http_base: self.base.clone(),
            public_key: field(&body, "public_key")?,
            fail_percent,
        })
    }

    /// Uploads a firmware image (`POST /api/v2/firmware`, multipart) of `kind` and `component`
    /// for `id_group` (`None`: every group, administrators only); returns its id.
    pub async fn upload_firmware(
        &self,
        kind: ModuleKind,
        component: &str,
        version: &str,
        id_group: Option<&str>,
        image: Vec<u8>,
    ) -> Result<String, SimulatorError> {
        let mut form = reqwest::multipart::Form::new()
            .text("kind", kind.as_str())
            .text("component", component.to_string())
            .text("version", version.to_string());
        if let Some(group) = id_group {
            form = form.text("id_group", group.to_string());
        }
        let form = form.part("file", reqwest::multipart::Part::bytes(image).file_name("image.bin"));
        let request = self
            .http
            .post(format!("{}/api/v2/firmware", self.base))
            .bearer_auth(&self.token)
            .multipart(form);
        let body = self.answer("POST /api/v2/firmware", request).await?;
        field(&body, "id_firmware")
    }

    /// Creates a group (administrators only) and returns its id.
    pub async fn create_group(&self, label: &str) -> Result<String, SimulatorError> {
        let body = self.post("/api/v2/group", &json!({"label": label})).await?;
        field(&body, "id_group")
    }

    /// Provisions one gateway in `id_group`; its device token comes back this once.
    pub async fn gateway(&self, id_group: &str, serial: &str, kind: ModuleKind) -> Result<GatewaySpec, SimulatorError> {
        let body = json!({"id_group": id_group, "serial_hardware": serial, "kind": kind.as_str(), "label": format!("Simulated {kind}")});
        let created = self.post("/api/v2/physical-device", &body).await?;
        Ok(GatewaySpec {
            id: Some(field(&created, "id_physical_device")?),
            ..GatewaySpec::new(serial, &field(&created, "device_token")?, kind)
        })
    }

    /// Provisions `count` gateways named `<prefix>-<n>` in `id_group`, kinds in turn GO, CORE,
    /// PLUS.
    pub async fn fleet(&self, id_group: &str, prefix: &str, count: usize) -> Result<Vec<GatewaySpec>, SimulatorError> {
        let mut specs = Vec::with_capacity(count);
        for (i, kind) in crate::spec::mixed_kinds(count).into_iter().enumerate() {
            specs.push(self.gateway(id_group, &format!("{prefix}-{}", i + 1), kind).await?);
        }
        Ok(specs)
    }
}

fn field(body: &Value, name: &str) -> Result<String, SimulatorError> {
    body[name]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| SimulatorError::Api(format!("answer without {name}: {body}")))
}
