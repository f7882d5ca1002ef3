//! `devicecloud demo`: the service on a fresh embedded store, seeded so that a newcomer can call
//! the API at once, with the credentials and working `curl` lines printed (contract §1).

use anyhow::{Context, Result};
use devicecloud_server::auth::secrets::{hash_password, random_token, token_hash};
use devicecloud_store::groups::{self, NewGroup};
use devicecloud_store::{Db, accounts, clients, memberships, new_id, unix_now};

use crate::settings::Settings;

const ADMIN: &str = "admin@devicecloud.demo";
const VIEWER: &str = "viewer@devicecloud.demo";
const PASSWORD: &str = "demo-password";

pub async fn run(mut settings: Settings) -> Result<()> {
    // A fresh store every time: the demo never touches an existing data dir's database.
    settings.data_dir = settings.data_dir.join(format!("demo-{}", unix_now()));
    settings.database_url = None;
    let db = Db::connect(&settings.database_url()?)
        .await
        .context("cannot open the demo store")?;
    let (client_id, secret) = seed(&db).await?;
    let data_dir = settings.data_dir.display().to_string();
    let on_ready =
        move |addr: std::net::SocketAddr| print_usage(&data_dir, &format!("http://{addr}"), &client_id, &secret);
    crate::serve(settings, Some(db), Some(Box::new(on_ready))).await
}

/// What a newcomer needs: where the API is, the accounts, and `curl` lines that work as printed.
fn print_usage(data_dir: &str, base: &str, client_id: &str, secret: &str) {
    let token_curl = format!(
        "TOKEN=$(curl -s -X POST {base}/oauth2/token -d grant_type=password -d client_id={client_id} -d client_secret={secret} -d username={ADMIN} -d password={PASSWORD} | sed -n 's/.*\"access_token\":\"\\([^\"]*\\)\".*/\\1/p')"
    );
    println!("devicecloud demo: store {data_dir}");
    println!("  API          {base}/api/v2/  (OpenAPI at {base}/api/v2/openapi.json)");
    println!("  accounts     {ADMIN} (administrator) and {VIEWER} (viewer of one group), password {PASSWORD}");
    println!("  API client   client_id={client_id} client_secret={secret}");
    println!("  get a token  {token_curl}");
    println!("  list groups  curl -s '{base}/api/v2/group/index?sort=label' -H \"Authorization: Bearer $TOKEN\"");
    println!("  stop with Ctrl-C");
}

/// Accounts, an API client and a few groups; returns the client's id and secret.
async fn seed(db: &Db) -> Result<(String, String)> {
    let now = unix_now();
    let hash = hash_password(PASSWORD).map_err(anyhow::Error::msg)?;
    accounts::create(db, ADMIN, &hash, true, now).await?;
    let viewer = accounts::create(db, VIEWER, &hash, false, now).await?;
    let (client_id, secret) = (new_id(), random_token());
    clients::create(db, &client_id, "demo", &token_hash(&secret), now).await?;
    for (i, (label, kind)) in [
        ("Rotterdam water plant", "1"),
        ("Utrecht district heating", "1"),
        ("Fleet of service vans", "4"),
    ]
    .into_iter()
    .enumerate()
    {
        let group = groups::create(
            db,
            &NewGroup {
                label,
                r#type: kind,
                subtype: "",
                id_country: None,
            },
            now,
        )
        .await?;
        if i == 0 {
            memberships::put(db, &group.id_group, &viewer.id_user, "viewer").await?;
        }
    }
    Ok((client_id, secret))
}
