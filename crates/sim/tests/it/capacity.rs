//! Capacity and time through the SDK: a hot index partition throttling base writes, the
//! table-wide limit leaving batch writes unprocessed, and the latency model.

use crate::support::*;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{BatchStatementErrorCodeEnum, PutRequest, WriteRequest};
use precise_ttl_sim::{Latency, Limits, SimConfig, Simulator};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_hot_index_partition_throttles_base_writes_with_throttling_errors() {
    let config = SimConfig {
        limits: Limits {
            partition_wcu: 200.0,
            partition_rcu: 3000.0,
            total_wcu: f64::INFINITY,
            total_rcu: f64::INFINITY,
            burst_seconds: 1.0,
        },
        ..quick()
    };
    let (sim, client) = with_table(config).await;
    // Every item on one index partition (shard 7), their keys spread over the table's 40.
    sim.plant(
        TABLE,
        (0..2000).map(|i| sim_item(&format!("k{i:05}"), NOW - 1, 7)),
    )
    .unwrap();
    let mut throttled = 0;
    let mut deleted = 0;
    let started = Instant::now();
    for batch in 0..20 {
        let mut call = client.batch_execute_statement();
        for i in 0..25 {
            call = call.statements(statement(&format!("k{:05}", batch * 25 + i), NOW));
        }
        for r in call.send().await.unwrap().responses() {
            match r.error() {
                None => deleted += 1,
                Some(e) => {
                    assert_eq!(
                        e.code(),
                        Some(&BatchStatementErrorCodeEnum::ThrottlingError)
                    );
                    assert!(
                        e.message()
                            .unwrap()
                            .starts_with("Throughput exceeds the current capacity")
                    );
                    throttled += 1;
                }
            }
        }
    }
    // The index partition's burst (200 units) and its refill meanwhile let that many through;
    // the table's partitions (200 each, 40 of them) would have taken all 500.
    let allowed = 200.0 + 200.0 * started.elapsed().as_secs_f64();
    assert!(
        deleted >= 200 && deleted as f64 <= allowed + 1.0,
        "deleted {deleted}, allowed {allowed}"
    );
    assert_eq!(deleted + throttled, 500);
    let stats = sim.stats();
    let index = &stats.tables[TABLE].indexes[INDEX];
    assert_eq!(
        index.throttles["IndexWriteKeyRangeThroughputExceeded"],
        throttled
    );
    assert_eq!(index.hottest_partition.as_ref().unwrap().0, "7");

    // A single call on the hot partition: ThrottlingException, which the SDK and the adapter
    // both classify as throttling.
    let mut attempt = 1000;
    let err = loop {
        // Calls outrun the refill (200 units a second) within a few attempts.
        attempt += 1;
        assert!(attempt < 1500, "never throttled");
        let result = client
            .delete_item()
            .table_name(TABLE)
            .key("pk", s(&format!("k{attempt:05}")))
            .send()
            .await;
        if let Err(e) = result {
            break e;
        }
    };
    let service = err.as_service_error().unwrap();
    assert!(service.is_throttling_exception(), "{err:?}");
    assert_eq!(err.code(), Some("ThrottlingException"));
    let aws_sdk_dynamodb::operation::delete_item::DeleteItemError::ThrottlingException(t) = service
    else {
        unreachable!()
    };
    let reason = &t.throttling_reasons()[0];
    assert_eq!(
        reason.reason(),
        Some("IndexWriteKeyRangeThroughputExceeded")
    );
    assert_eq!(
        reason.resource(),
        Some("arn:aws:dynamodb:us-east-1:000000000000:table/bench/index/precise-ttl")
    );

    // A second later the partition has refilled.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    client
        .delete_item()
        .table_name(TABLE)
        .key("pk", s("k01999"))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn the_table_wide_limit_leaves_batch_writes_unprocessed() {
    let config = SimConfig {
        limits: Limits {
            partition_wcu: 1000.0,
            partition_rcu: 3000.0,
            // 60 units of burst refilled at 6 a second: a unit takes 167 ms to come back, so the
            // calls below see the same bucket however slowly a loaded machine runs them.
            total_wcu: 6.0,
            total_rcu: 40_000.0,
            burst_seconds: 10.0,
        },
        ..quick()
    };
    let (sim, client) = with_table(config).await;
    let batch = |from: usize| {
        let mut call = client.batch_write_item();
        let requests: Vec<WriteRequest> = (from..from + 25)
            .map(|i| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .item("pk", s(&format!("p{i}")))
                            .build()
                            .unwrap(),
                    )
                    .build()
            })
            .collect();
        call = call.request_items(TABLE, requests);
        call.send()
    };
    for from in [0, 25] {
        let out = batch(from).await.unwrap();
        assert!(out.unprocessed_items().is_none_or(|u| u.is_empty()));
    }
    // 60 units of burst: about 10 more fit (and what refilled meanwhile).
    let third = batch(50).await.unwrap();
    let unprocessed = third.unprocessed_items().unwrap()[TABLE].len();
    assert!((12..=15).contains(&unprocessed), "{unprocessed}");
    // Nothing left at all: the whole call is throttled.
    let err = batch(75).await.unwrap_err();
    assert_eq!(err.code(), Some("ThrottlingException"));
    let stats = sim.stats();
    let throttles = stats.tables[TABLE].throttles["TableWriteAccountLimitExceeded"];
    assert_eq!(throttles as usize, unprocessed + 25);
    assert_eq!(stats.tables[TABLE].items as usize, 75 - unprocessed);
}

#[tokio::test]
async fn latency_follows_the_model_or_is_absent() {
    async fn median_ms(sim: &Simulator) -> f64 {
        let client = client(sim);
        create_table(&client).await;
        let mut times = Vec::new();
        for i in 0..40 {
            let started = Instant::now();
            client
                .get_item()
                .table_name(TABLE)
                .key("pk", s(&format!("k{i}")))
                .send()
                .await
                .unwrap();
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    }
    let none = Simulator::start(quick()).unwrap();
    let fast = median_ms(&none).await;
    let slow_config = SimConfig {
        latency: Latency::LogNormal {
            p50: Duration::from_millis(25),
            p99: Duration::from_millis(40),
        },
        ..SimConfig::default()
    };
    let slow_sim = Simulator::start(slow_config).unwrap();
    let slow = median_ms(&slow_sim).await;
    assert!(fast < 10.0, "no latency: median {fast} ms");
    assert!((22.0..45.0).contains(&slow), "p50 25 ms: median {slow} ms");
}
