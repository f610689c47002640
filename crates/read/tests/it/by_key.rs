//! Reads by key: GetItem, BatchGetItem and TransactGetItems treat an expired item as absent,
//! with and without a projection that leaves out the TTL attribute (which they add and strip).

use crate::support::*;
use aws_sdk_dynamodb::types::{Get, KeysAndAttributes, TransactGetItem};
use precise_ttl_core::Timestamp;

async fn get(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    sk: &str,
    projection: bool,
) -> Option<Item> {
    let mut request = client
        .get_item()
        .table_name(table)
        .set_key(Some(key_of(sk)));
    if projection {
        request = request
            .projection_expression("sk, #d")
            .expression_attribute_names("#d", "data");
    }
    request.send().await.unwrap().item
}

#[tokio::test]
async fn get_item_treats_an_expired_item_as_absent() {
    let (table, client) = hiding_table().await;
    for sk in HIDDEN {
        assert_eq!(get(&client, &table, sk, false).await, None, "{sk}");
        assert_eq!(
            get(&client, &table, sk, true).await,
            None,
            "{sk}, projected"
        );
    }
    for sk in VISIBLE {
        let whole = get(&client, &table, sk, false).await.expect(sk);
        assert_eq!(whole.contains_key("ttl"), sk != "no-ttl", "{sk}");
        let projected = get(&client, &table, sk, true).await.expect(sk);
        assert_eq!(
            projected.keys().collect::<std::collections::BTreeSet<_>>(),
            ["data", "sk"]
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .iter()
                .collect(),
            "{sk}: only what was asked for"
        );
    }
}

#[tokio::test]
async fn a_projection_that_names_the_ttl_attribute_keeps_it() {
    let (table, client) = hiding_table().await;
    let item = client
        .get_item()
        .table_name(&table)
        .set_key(Some(key_of("future")))
        .projection_expression("sk, #t")
        .expression_attribute_names("#t", "ttl")
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert!(item.contains_key("ttl"));
    assert_eq!(item.len(), 2);
}

#[tokio::test]
async fn legacy_attributes_to_get_is_widened_and_stripped_too() {
    let (table, client) = hiding_table().await;
    let read = |sk: &'static str| {
        client
            .get_item()
            .table_name(&table)
            .set_key(Some(key_of(sk)))
            .attributes_to_get("sk")
            .attributes_to_get("data")
            .send()
    };
    assert_eq!(read("exp-1h").await.unwrap().item, None);
    let item = read("future").await.unwrap().item.unwrap();
    assert_eq!(item.len(), 2);
    assert!(!item.contains_key("ttl"));
}

#[tokio::test]
async fn batch_get_item_leaves_out_expired_items() {
    let (table, client) = hiding_table().await;
    let keys: Vec<Item> = all().iter().map(|sk| key_of(sk)).collect();
    for projection in [false, true] {
        let mut request = KeysAndAttributes::builder().set_keys(Some(keys.clone()));
        if projection {
            request = request
                .projection_expression("sk, #d")
                .expression_attribute_names("#d", "data");
        }
        let out = client
            .batch_get_item()
            .request_items(&table, request.build().unwrap())
            .send()
            .await
            .unwrap();
        let items = &out.responses.as_ref().unwrap()[&table];
        assert_eq!(sks(items), visible(), "projection: {projection}");
        if projection {
            assert!(items.iter().all(|i| i.len() == 2 && !i.contains_key("ttl")));
        }
        assert!(out.unprocessed_keys.is_none_or(|u| u.is_empty()));
    }
}

#[tokio::test]
async fn transact_get_items_keeps_positions_and_empties_expired_entries() {
    let (table, client) = hiding_table().await;
    let order = all();
    for projection in [false, true] {
        let mut request = client.transact_get_items();
        for sk in &order {
            let mut get = Get::builder().table_name(&table).set_key(Some(key_of(sk)));
            if projection {
                get = get
                    .projection_expression("sk, #d")
                    .expression_attribute_names("#d", "data");
            }
            request = request
                .transact_items(TransactGetItem::builder().get(get.build().unwrap()).build());
        }
        let out = request.send().await.unwrap();
        let responses = out.responses();
        assert_eq!(responses.len(), order.len());
        for (sk, response) in order.iter().zip(responses) {
            let hidden = HIDDEN.contains(&sk.as_str());
            assert_eq!(
                response.item.is_none(),
                hidden,
                "{sk}, projection: {projection}"
            );
            if let Some(item) = &response.item {
                assert_eq!(sks([item]), vec![sk.clone()]);
                if projection {
                    assert_eq!(item.len(), 2, "{sk}");
                }
            }
        }
    }
}

#[tokio::test]
async fn the_default_clock_is_the_wall_clock() {
    let (table, _) = table().await;
    let client = hiding(precise_ttl_read::HideExpired::default());
    assert_eq!(get(&client, &table, "exp-1s", false).await, None);
    assert!(get(&client, &table, "future", false).await.is_some());
    // With the clock stopped at the epoch, nothing in the fixture has expired yet.
    let early = hiding_at(Timestamp::from_secs(0));
    assert!(get(&early, &table, "exp-1s", false).await.is_some());
}
