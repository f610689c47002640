//! PartiQL: ExecuteStatement's SELECTs (paged by NextToken), statements that are not SELECTs,
//! BatchExecuteStatement and ExecuteTransaction.

use crate::support::*;
use aws_sdk_dynamodb::types::{BatchStatementRequest, ParameterizedStatement};

#[tokio::test]
async fn select_star_hides_expired_items_across_pages() {
    let (table, client) = hiding_table().await;
    let statement = format!("SELECT * FROM \"{table}\" WHERE pk = ?");
    let whole = on_partition(&client, &statement).send().await.unwrap();
    assert_eq!(sks(whole.items()), visible());

    let mut seen = Vec::new();
    let mut token = None;
    loop {
        let page = on_partition(&client, &statement)
            .limit(2)
            .set_next_token(token)
            .send()
            .await
            .unwrap();
        seen.extend(page.items().iter().cloned());
        token = page.next_token;
        if token.is_none() {
            break;
        }
    }
    assert_eq!(sks(&seen), visible());
}

#[tokio::test]
async fn a_select_without_the_ttl_attribute_cannot_be_judged_and_shows_everything() {
    let (table, client) = hiding_table().await;
    let out = on_partition(&client, format!("SELECT sk FROM \"{table}\" WHERE pk = ?"))
        .send()
        .await
        .unwrap();
    assert_eq!(sks(out.items()), all());
    let out = on_partition(
        &client,
        format!("select sk, ttl FROM \"{table}\" WHERE pk = ?"),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(sks(out.items()), visible());
}

#[tokio::test]
async fn statements_that_are_not_selects_are_untouched() {
    let (table, client) = hiding_table().await;
    client
        .execute_statement()
        .statement(format!(
            "UPDATE \"{table}\" SET data = 'changed' WHERE pk = ? AND sk = 'exp-1h'"
        ))
        .parameters(s(PK))
        .send()
        .await
        .unwrap();
    let raw = plain()
        .get_item()
        .table_name(&table)
        .set_key(Some(key_of("exp-1h")))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(raw["data"], s("changed"));
}

/// `statement` with the fixture's partition key as its one parameter.
fn on_partition(
    client: &aws_sdk_dynamodb::Client,
    statement: impl Into<String>,
) -> aws_sdk_dynamodb::operation::execute_statement::builders::ExecuteStatementFluentBuilder {
    client
        .execute_statement()
        .statement(statement)
        .parameters(s(PK))
}

fn select_one(table: &str, sk: &str) -> String {
    format!("SELECT * FROM \"{table}\" WHERE pk = '{PK}' AND sk = '{sk}'")
}

#[tokio::test]
async fn batch_execute_statement_empties_expired_entries() {
    let (table, client) = hiding_table().await;
    let order = all();
    let mut request = client.batch_execute_statement();
    for sk in &order {
        request = request.statements(
            BatchStatementRequest::builder()
                .statement(select_one(&table, sk))
                .build()
                .unwrap(),
        );
    }
    let out = request.send().await.unwrap();
    assert_eq!(out.responses().len(), order.len());
    for (sk, response) in order.iter().zip(out.responses()) {
        assert!(response.error.is_none(), "{sk}: {:?}", response.error);
        assert_eq!(
            response.item.is_none(),
            HIDDEN.contains(&sk.as_str()),
            "{sk}"
        );
    }
}

#[tokio::test]
async fn execute_transaction_empties_expired_entries() {
    let (table, client) = hiding_table().await;
    let order = ["exp-1h", "future", "exp-decimal", "no-ttl"];
    let mut request = client.execute_transaction();
    for sk in order {
        request = request.transact_statements(
            ParameterizedStatement::builder()
                .statement(select_one(&table, sk))
                .build()
                .unwrap(),
        );
    }
    let out = request.send().await.unwrap();
    let present: Vec<bool> = out.responses().iter().map(|r| r.item.is_some()).collect();
    assert_eq!(present, [false, true, false, true]);
}
