//! The dashboard's account pages over real HTTP: administrators list accounts, disable and
//! enable them, reset their passwords and change their administrator rights; every account
//! changes its own password. What each change ends (sessions, tokens, the old password) is
//! checked from the other account's browser and token.

mod common;

use common::browser::Browser;
use common::{TestApp, assert_invalid_credentials, send};
use devicecloud_store::{accounts, unix_now};

const PASSWORD: &str = "dashboard-password";
const NEW_PASSWORD: &str = "a-brand-new-password";
/// How a disabled account is marked in a list.
const DISABLED_BADGE: &str = "<span class=\"status alarm\">disabled</span>";

/// An administrator's browser and a normal account signed in through a browser and holding an
/// API token.
struct Setup {
    app: TestApp,
    admin_id: String,
    admin: Browser,
    user_id: String,
    user: Browser,
    user_token: String,
}

const USER: &str = "ann@example.com";

async fn setup() -> Setup {
    let app = TestApp::spawn().await;
    let admin_id = app.create_user("root@example.com", PASSWORD, true).await;
    let user_id = app.create_user(USER, PASSWORD, false).await;
    let mut admin = Browser::new(&app);
    admin.sign_in("root@example.com", PASSWORD).await.expect(303);
    let mut user = Browser::new(&app);
    user.sign_in(USER, PASSWORD).await.expect(303);
    let user_token = app.token(USER, PASSWORD).await;
    Setup {
        app,
        admin_id,
        admin,
        user_id,
        user,
        user_token,
    }
}

impl Setup {
    /// Asserts that the user's session and token have ended.
    async fn user_is_signed_out(&mut self) {
        let reply = self.user.get("/").await.expect(303);
        assert_eq!(reply.header("location"), Some("/login?next=%2F"));
        assert_invalid_credentials(&send(self.app.get("/api/v2/group", &self.user_token)).await);
    }

    /// Whether `password` signs the user in through the form (and then in that browser).
    async fn user_signs_in_with(&mut self, password: &str) -> bool {
        let mut browser = Browser::new(&self.app);
        match browser.sign_in(USER, password).await.status {
            303 => {
                self.user = browser;
                true
            }
            401 => false,
            other => panic!("sign-in answered {other}"),
        }
    }

    fn account_page(&self) -> String {
        format!("/admin/accounts/{}", self.user_id)
    }
}

#[tokio::test]
async fn administrators_disable_and_enable_an_account() {
    let mut s = setup().await;
    let nav = s.admin.get("/").await.expect(200);
    assert!(nav.text.contains("href=\"/admin/accounts\""));
    let list = s.admin.get("/admin/accounts").await.expect(200);
    assert!(list.text.contains(&format!("href=\"{}\"", s.account_page())));
    assert!(list.text.contains(USER) && !list.text.contains(DISABLED_BADGE));
    let page = s.admin.get(&s.account_page()).await.expect(200);
    assert!(page.text.contains("Disable") && page.text.contains("Make administrator"));

    let path = s.account_page();
    s.admin
        .post_without_token(&path, &[("disabled", "1")])
        .await
        .expect(403);
    let done = s.admin.post(&path, &[("disabled", "1")]).await.expect(200);
    assert!(done.text.contains("Account disabled"), "{}", done.text);
    assert!(done.text.contains(">Enable<"));
    s.user_is_signed_out().await;
    assert!(!s.user_signs_in_with(PASSWORD).await);
    let list = s.admin.get("/admin/accounts").await.expect(200);
    assert!(list.text.contains(DISABLED_BADGE));
    let admin_page = s.admin.get("/admin").await.expect(200);
    assert!(admin_page.text.contains(&format!("href=\"{path}\"")) && admin_page.text.contains(DISABLED_BADGE));

    let done = s.admin.post(&path, &[("disabled", "0")]).await.expect(200);
    assert!(done.text.contains("Account enabled"));
    assert!(s.user_signs_in_with(PASSWORD).await);
    s.user.get("/").await.expect(200);

    // Not their own account: the service's field error, and they stay signed in.
    let own = format!("/admin/accounts/{}", s.admin_id);
    let page = s.admin.get(&own).await.expect(200);
    assert!(!page.text.contains(">Disable<"));
    let refused = s.admin.post(&own, &[("disabled", "1")]).await.expect(422);
    assert!(refused.text.contains("You cannot disable your own account."));
    let refused = s.admin.post(&own, &[("is_admin", "0")]).await.expect(422);
    assert!(refused.text.contains("You cannot take your own administrator rights."));
    s.admin.get("/admin/accounts").await.expect(200);
    s.admin.get("/admin/accounts/no-such-account").await.expect(404);
}

#[tokio::test]
async fn administrators_reset_a_password_and_change_rights() {
    let mut s = setup().await;
    let path = s.account_page();
    let short = s.admin.post(&path, &[("password", "short")]).await.expect(422);
    assert!(short.text.contains("Password should contain at least 8 characters."));
    s.user.get("/").await.expect(200);

    let done = s.admin.post(&path, &[("password", NEW_PASSWORD)]).await.expect(200);
    assert!(done.text.contains("Password reset"));
    s.user_is_signed_out().await;
    assert!(!s.user_signs_in_with(PASSWORD).await);
    assert!(s.user_signs_in_with(NEW_PASSWORD).await);

    // Administrator rights take effect on the user's next page, without signing in again.
    s.user.get("/admin/accounts").await.expect(403);
    let done = s.admin.post(&path, &[("is_admin", "1")]).await.expect(200);
    assert!(done.text.contains("Administrator rights granted."));
    assert!(done.text.contains("Remove administrator rights"));
    s.user.get("/admin/accounts").await.expect(200);
    let done = s.admin.post(&path, &[("is_admin", "0")]).await.expect(200);
    assert!(done.text.contains("Administrator rights removed."));
    s.user.get("/admin/accounts").await.expect(403);
    let bad = s.admin.post(&path, &[("is_admin", "maybe")]).await.expect(422);
    assert!(bad.text.contains("must be either"));
}

#[tokio::test]
async fn an_administrator_resetting_their_own_password_signs_in_again() {
    let mut s = setup().await;
    let own = format!("/admin/accounts/{}", s.admin_id);
    let reply = s.admin.post(&own, &[("password", NEW_PASSWORD)]).await.expect(303);
    assert_eq!(reply.header("location"), Some("/login?notice=password-changed"));
    assert!(!s.admin.cookies.contains_key("dc_session"));
    s.admin.sign_in("root@example.com", NEW_PASSWORD).await.expect(303);
}

#[tokio::test]
async fn users_change_their_own_password() {
    let mut s = setup().await;
    let mut elsewhere = Browser::new(&s.app);
    elsewhere.sign_in(USER, PASSWORD).await.expect(303);
    let home = s.user.get("/").await.expect(200);
    assert!(home.text.contains("href=\"/account/password\""));
    assert!(!home.text.contains("href=\"/admin/accounts\""));
    let form = s.user.get("/account/password").await.expect(200);
    assert!(form.text.contains("name=\"current_password\""));

    let change = |current: &'static str, new: &'static str, repeat: &'static str| {
        [
            ("current_password", current),
            ("password", new),
            ("password_repeat", repeat),
        ]
    };
    s.user
        .post_without_token("/account/password", &change(PASSWORD, NEW_PASSWORD, NEW_PASSWORD))
        .await
        .expect(403);
    let wrong = s
        .user
        .post(
            "/account/password",
            &change("not-my-password", NEW_PASSWORD, NEW_PASSWORD),
        )
        .await
        .expect(422);
    assert!(wrong.text.contains("Current password is incorrect."));
    let mismatch = s
        .user
        .post("/account/password", &change(PASSWORD, NEW_PASSWORD, "a-typo-in-it"))
        .await
        .expect(422);
    assert!(mismatch.text.contains("The new passwords do not match."));
    let short = s
        .user
        .post("/account/password", &change(PASSWORD, "short", "short"))
        .await
        .expect(422);
    assert!(short.text.contains("Password should contain at least 8 characters."));
    // Refusals changed nothing.
    elsewhere.get("/").await.expect(200);
    send(s.app.get("/api/v2/group", &s.user_token)).await.expect(200);

    let done = s
        .user
        .post("/account/password", &change(PASSWORD, NEW_PASSWORD, NEW_PASSWORD))
        .await
        .expect(303);
    assert_eq!(done.header("location"), Some("/login?notice=password-changed"));
    let signin = s.user.get("/login?notice=password-changed").await.expect(200);
    assert!(signin.text.contains("Your password was changed"));
    elsewhere.get("/").await.expect(303);
    s.user_is_signed_out().await;
    assert!(!s.user_signs_in_with(PASSWORD).await);
    assert!(s.user_signs_in_with(NEW_PASSWORD).await);
    // Only known notices are shown: a link cannot put its own words on the form.
    let signin = Browser::new(&s.app).get("/login?notice=Call+us").await.expect(200);
    assert!(!signin.text.contains("Call us") && !signin.text.contains("class=\"notice\""));
}

#[tokio::test]
async fn non_administrators_cannot_reach_the_accounts_pages() {
    let mut s = setup().await;
    s.user.get("/admin/accounts").await.expect(403);
    s.user.get(&format!("/admin/accounts/{}", s.admin_id)).await.expect(403);
    let path = s.account_page();
    s.user.post(&path, &[("password", NEW_PASSWORD)]).await.expect(403);
    s.user
        .post(&format!("/admin/accounts/{}", s.admin_id), &[("disabled", "1")])
        .await
        .expect(403);
    assert!(s.user_signs_in_with(PASSWORD).await);
    let mut anonymous = Browser::new(&s.app);
    for path in ["/admin/accounts", "/account/password"] {
        assert_eq!(
            anonymous
                .get(path)
                .await
                .expect(303)
                .header("location")
                .map(str::to_string),
            Some(format!("/login?next={}", common::enc(path)))
        );
    }
}

#[tokio::test]
async fn the_account_list_is_paginated() {
    let mut s = setup().await;
    // Straight into the store: the list does not care about the password hash.
    for i in 0..55 {
        accounts::create(
            &s.app.state.db,
            &format!("bulk{i:02}@example.com"),
            "unused",
            false,
            unix_now(),
        )
        .await
        .unwrap();
    }
    let first = s.admin.get("/admin/accounts").await.expect(200);
    let rows = |text: &str| text.matches("href=\"/admin/accounts/").count();
    assert_eq!(rows(&first.text), 50);
    assert!(first.text.contains("Page 1 of 2 · 57 in all"));
    assert!(first.text.contains("href=\"/admin/accounts?page=2\""));
    let second = s.admin.get("/admin/accounts?page=2").await.expect(200);
    assert_eq!(rows(&second.text), 7);
    assert!(second.text.contains("rel=\"prev\""));
}
