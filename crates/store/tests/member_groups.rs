//! A normal user's groups are read from their memberships, which carry their group's times
//! (migration 0013), and counted from `member_group_counts` (0014), both kept by triggers: after
//! every grant, role change, removal and group deletion, in any order, the page and the count
//! agree with the groups themselves.

mod common;

use std::time::Duration;

use devicecloud_query::PageRequest;
use devicecloud_store::groups::{self, GroupScope, NewGroup};
use devicecloud_store::{Db, ListArgs, accounts, memberships};

/// The groups `id_user` holds a role in that are not deleted, oldest first, read from the
/// groups themselves (not from what the memberships carry).
async fn truth(db: &Db, id_user: &str) -> Vec<String> {
    let sql = "SELECT g.id_group FROM memberships m JOIN groups g ON g.id_group = m.id_group \
               WHERE m.id_user = $1 AND g.deleted_at IS NULL ORDER BY g.created_at, g.id_group";
    match db {
        Db::Sqlite(p, ..) => sqlx::query_scalar(sql).bind(id_user).fetch_all(p).await.unwrap(),
        Db::Postgres(p) => sqlx::query_scalar(sql).bind(id_user).fetch_all(p).await.unwrap(),
    }
}

/// The first page of `per_page` and the total, as the collection answers them.
async fn listed(db: &Db, id_user: &str, per_page: u64) -> (Vec<String>, u64) {
    let args = ListArgs {
        scope: GroupScope::MemberOf(id_user),
        filter: None,
        sort: None,
        page: PageRequest {
            page: 1,
            per_page,
            default_per_page: 20,
        },
        count_only: false,
    };
    let listing = groups::list(db, args).await.unwrap();
    let ids = listing.items.into_iter().map(|g| g.id_group).collect();
    (ids, listing.page.total)
}

#[tokio::test]
async fn a_members_page_and_count_follow_every_change_of_roles_and_groups() {
    let store = common::store("member_groups").await;
    // The request pool too: its short reads run on connections of their own (`quick_read`).
    let requests = store.db.for_requests(Duration::from_secs(5), 4);
    let mut users = Vec::new();
    for i in 0..4 {
        let user = accounts::create(&store.db, &format!("user{i}@example.com"), "x", false, 0)
            .await
            .unwrap();
        users.push(user.id_user);
    }
    let mut group_ids = Vec::new();
    for i in 0..12 {
        let group = NewGroup {
            label: "g",
            r#type: "0",
            subtype: "",
            id_country: None,
        };
        // Created out of key order, some at the same second.
        let created = (i * 7) % 5;
        group_ids.push(groups::create(&store.db, &group, created).await.unwrap().id_group);
    }

    // A fixed pseudo-random walk over grants, role changes, removals and deletions.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let roles = ["viewer", "operator", "manager"];
    for step in 0..240 {
        let (user, group) = (&users[next(users.len())], &group_ids[next(group_ids.len())]);
        match next(10) {
            0..=5 => memberships::put(&store.db, group, user, roles[next(3)]).await.unwrap(),
            6..=8 => {
                memberships::remove(&store.db, group, user).await.unwrap();
            }
            _ => {
                groups::soft_delete(&store.db, group, 10 + step).await.unwrap();
            }
        }
        for user in &users {
            let expected = truth(&store.db, user).await;
            for db in [&store.db, &requests] {
                let (page, total) = listed(db, user, 3).await;
                assert_eq!(total, expected.len() as u64, "step {step}: count of {user}");
                assert_eq!(page, expected[..expected.len().min(3)], "step {step}: page of {user}");
            }
        }
    }
    let deleted = groups::list(
        &store.db,
        ListArgs::unscoped(
            None,
            None,
            PageRequest {
                page: 1,
                per_page: 20,
                default_per_page: 20,
            },
            true,
        ),
    )
    .await
    .unwrap();
    assert_eq!(deleted.page.total, 12, "the walk kept every group (deleted ones too)");

    // An account removed takes its memberships and its count with it.
    let gone = &users[0];
    common::execute_text(&store.db, "DELETE FROM accounts WHERE id_user = $1", gone).await;
    assert_eq!(listed(&store.db, gone, 3).await, (Vec::new(), 0));
}
