//! Failed sign-ins (docs/operations.md, "Limits"): the password grant and the dashboard form
//! count them per (username, client address); past the limit that pair answers 429 with
//! `Retry-After` without the password being checked, while the same username from another
//! address, or another username from the same address, goes on.

mod common;

use std::time::Duration;

use common::browser::Browser;
use common::{Reply, TestApp, assert_error, send};
use devicecloud_server::{FrontEnd, Settings};

const PASSWORD: &str = "the right password";

/// A service behind a trusted proxy on loopback, so that tests choose the client address with
/// `X-Forwarded-For`.
async fn behind_proxy(failures_max: u32, window: Duration) -> TestApp {
    let mut settings = Settings {
        front_end: FrontEnd {
            public_url: None,
            trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
        },
        ..Settings::default()
    };
    settings.limits.signin_failures_max = failures_max;
    settings.limits.signin_window = window;
    let app = TestApp::spawn_with(settings).await;
    app.create_user("ann@example.com", PASSWORD, false).await;
    app.create_user("bob@example.com", PASSWORD, false).await;
    app
}

async fn grant(app: &TestApp, username: &str, password: &str, from: &str) -> Reply {
    send(
        app.http
            .post(app.url("/oauth2/token"))
            .header("x-forwarded-for", from)
            .form(&[
                ("grant_type", "password"),
                ("client_id", &app.client_id),
                ("client_secret", &app.client_secret),
                ("username", username),
                ("password", password),
            ]),
    )
    .await
}

fn retry_after(reply: &Reply) -> u64 {
    reply.header("retry-after").expect("Retry-After").parse().unwrap()
}

#[tokio::test]
async fn the_password_grant_blocks_one_username_from_one_address() {
    let app = behind_proxy(10, Duration::from_secs(300)).await;
    for _ in 0..10 {
        grant(&app, "ann@example.com", "wrong", "203.0.113.5").await.expect(401);
    }
    // Even the right password now waits, in any case of the username.
    let reply = grant(&app, "ANN@example.com", PASSWORD, "203.0.113.5")
        .await
        .expect(429);
    let body = reply.json();
    assert_error(&body, 429);
    assert_eq!(body["name"], "Too Many Requests");
    assert_eq!(body["error"], "slow_down");
    assert_eq!(body["error_description"], body["message"]);
    assert!(
        (1..=300).contains(&retry_after(&reply)),
        "{:?}",
        reply.header("retry-after")
    );
    // The same username from elsewhere, another username from here: not blocked.
    grant(&app, "ann@example.com", PASSWORD, "198.51.100.7")
        .await
        .expect(200);
    grant(&app, "bob@example.com", PASSWORD, "203.0.113.5")
        .await
        .expect(200);
    grant(&app, "bob@example.com", "wrong", "203.0.113.5").await.expect(401);
}

#[tokio::test]
async fn a_success_forgets_the_failures() {
    let app = behind_proxy(3, Duration::from_secs(300)).await;
    for _ in 0..2 {
        grant(&app, "ann@example.com", "wrong", "203.0.113.5").await.expect(401);
    }
    grant(&app, "ann@example.com", PASSWORD, "203.0.113.5")
        .await
        .expect(200);
    for _ in 0..3 {
        grant(&app, "ann@example.com", "wrong", "203.0.113.5").await.expect(401);
    }
    grant(&app, "ann@example.com", PASSWORD, "203.0.113.5")
        .await
        .expect(429);
}

#[tokio::test]
async fn the_block_ends_with_the_window() {
    let app = behind_proxy(2, Duration::from_secs(1)).await;
    for _ in 0..2 {
        grant(&app, "ann@example.com", "wrong", "203.0.113.5").await.expect(401);
    }
    let reply = grant(&app, "ann@example.com", PASSWORD, "203.0.113.5")
        .await
        .expect(429);
    assert_eq!(retry_after(&reply), 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    grant(&app, "ann@example.com", PASSWORD, "203.0.113.5")
        .await
        .expect(200);
}

#[tokio::test]
async fn the_dashboard_and_the_password_grant_count_together() {
    let app = behind_proxy(4, Duration::from_secs(300)).await;
    for _ in 0..2 {
        grant(&app, "ann@example.com", "wrong", "127.0.0.1").await.expect(401);
    }
    let mut browser = Browser::new(&app);
    for _ in 0..2 {
        assert_eq!(browser.sign_in("ann@example.com", "wrong").await.status, 401);
    }
    let reply = browser.sign_in("ann@example.com", PASSWORD).await.expect(429);
    assert!(reply.header("retry-after").is_some());
    grant(&app, "ann@example.com", PASSWORD, "127.0.0.1").await.expect(429);
    // The dashboard's own client address follows the same proxy rule.
    grant(&app, "ann@example.com", PASSWORD, "192.0.2.1").await.expect(200);
}

/// One address spraying a password over many usernames meets a limit of its own
/// (`signin_address_failures_max`), whatever the usernames; other addresses go on, and signing
/// in to one's own account does not reset the address.
#[tokio::test]
async fn an_address_spraying_usernames_is_limited() {
    let app = behind_proxy(10, Duration::from_secs(300)).await;
    for i in 0..29 {
        grant(&app, &format!("user{i}@example.com"), "Summer2026!", "203.0.113.9")
            .await
            .expect(401);
    }
    // Its own account signs in: counted back, not a reset.
    grant(&app, "bob@example.com", PASSWORD, "203.0.113.9")
        .await
        .expect(200);
    grant(&app, "user29@example.com", "Summer2026!", "203.0.113.9")
        .await
        .expect(401);
    let reply = grant(&app, "ann@example.com", PASSWORD, "203.0.113.9")
        .await
        .expect(429);
    assert_error(&reply.json(), 429);
    assert!((1..=300).contains(&retry_after(&reply)));
    grant(&app, "ann@example.com", PASSWORD, "198.51.100.9")
        .await
        .expect(200);
}

/// Every spelling of a username that the store matches to an account counts against that
/// account's one budget: PostgreSQL's `lower` reads `İnci` as `inci`, where a key made of the
/// typed name lower-cased by Rust (`i̇nci`) would have given each spelling a budget of its own.
#[tokio::test]
async fn every_spelling_of_an_account_shares_its_budget() {
    let app = behind_proxy(10, Duration::from_secs(300)).await;
    app.create_user("inci@example.com", PASSWORD, false).await;
    // Whether this store's `lower` matches the dotted capital to the account.
    let matched = grant(&app, "İnci@example.com", PASSWORD, "203.0.113.20").await.status == 200;
    for spelling in ["inci@example.com", "İnci@example.com"] {
        for _ in 0..5 {
            grant(&app, spelling, "wrong", "203.0.113.21").await.expect(401);
        }
    }
    let reply = grant(&app, "inci@example.com", PASSWORD, "203.0.113.21").await;
    // Where the store matches both spellings, they made 10 failures of one account.
    assert_eq!(reply.status, if matched { 429 } else { 200 }, "matched: {matched}");
}
