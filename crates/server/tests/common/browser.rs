//! A browser in miniature for the dashboard tests: cookies kept, no redirect followed, the CSRF
//! token of the last page remembered.

use std::collections::HashMap;

use super::{Reply, TestApp, send};

/// A browser in miniature: keeps cookies, never follows redirects, and reads the CSRF token
/// of the last page.
pub struct Browser {
    http: reqwest::Client,
    base: String,
    pub cookies: HashMap<String, String>,
    pub csrf: String,
}

impl Browser {
    pub fn new(app: &TestApp) -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: app.base.clone(),
            cookies: HashMap::new(),
            csrf: String::new(),
        }
    }

    pub fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Sends, then keeps the cookies set and the CSRF token shown.
    pub async fn send(&mut self, request: reqwest::RequestBuilder) -> Reply {
        let reply = send(request.header("Cookie", self.cookie_header())).await;
        for value in reply.headers.get_all("set-cookie") {
            let text = value.to_str().unwrap();
            let (pair, _) = text.split_once(';').unwrap_or((text, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || text.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_string(), value.to_string());
            }
        }
        if let Some(token) = hidden(&reply.text, "_csrf") {
            self.csrf = token;
        }
        reply
    }

    pub async fn get(&mut self, path: &str) -> Reply {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    /// Posts a form with the current CSRF token.
    pub async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Reply {
        let mut form: Vec<(&str, &str)> = vec![("_csrf", &self.csrf)];
        form.extend_from_slice(fields);
        let body = serde_urlencoded(&form);
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body);
        self.send(request).await
    }

    /// Posts a multipart form as it is (the caller adds `_csrf` where the page has it).
    pub async fn post_multipart(&mut self, path: &str, form: reqwest::multipart::Form) -> Reply {
        let request = self.http.post(format!("{}{path}", self.base)).multipart(form);
        self.send(request).await
    }

    /// Posts a form without any CSRF token.
    pub async fn post_without_token(&mut self, path: &str, fields: &[(&str, &str)]) -> Reply {
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(serde_urlencoded(fields));
        self.send(request).await
    }

    /// Signs in; once signed in, opens the overview to hold the session's CSRF token.
    pub async fn sign_in(&mut self, username: &str, password: &str) -> Reply {
        self.get("/login").await.expect(200);
        let reply = self
            .post(
                "/login",
                &[("username", username), ("password", password), ("next", "/")],
            )
            .await;
        if reply.status == 303 {
            self.get("/").await.expect(200);
        }
        reply
    }
}

fn serde_urlencoded(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", super::enc(k), super::enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The value of the first hidden input named `name`.
pub fn hidden(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    Some(html[start..].split('"').next()?.to_string())
}
