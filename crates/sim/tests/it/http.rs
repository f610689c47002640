//! The simulator's own HTTP: its side endpoints (`/deletions`, `/stats`) and DynamoDB's answers
//! to protocol errors, on raw requests.

use crate::support::*;
use precise_ttl_sim::Simulator;

/// GET of a side endpoint: it must answer 200 with JSON.
async fn get_json(sim: &Simulator, path: &str) -> serde_json::Value {
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let (status, body) = http(sim, &request).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[tokio::test]
async fn side_endpoints_report_stats_and_deletions_and_protocol_errors_are_dynamodbs() {
    let (sim, client) = with_table(quick()).await;
    sim.plant(
        TABLE,
        (0..3).map(|i| sim_item(&format!("k{i}"), NOW - 1, 0)),
    )
    .unwrap();
    for i in 0..3 {
        client
            .delete_item()
            .table_name(TABLE)
            .key("pk", s(&format!("k{i}")))
            .send()
            .await
            .unwrap();
    }
    let json = get_json(&sim, "/deletions?from=1&limit=5").await;
    assert_eq!(json["total"], 3);
    assert_eq!(json["next"], 3);
    assert_eq!(json["deletions"][0][1], TABLE);
    assert_eq!(json["deletions"][0][2], "k1");
    assert!(json["deletions"][0][0].as_f64().unwrap() > 1.7e12);

    let json = get_json(&sim, "/stats").await;
    assert_eq!(json["tables"][TABLE]["usage"]["write_units"], 3.0);
    assert_eq!(
        json["tables"][TABLE]["indexes"][INDEX]["usage"]["write_units"],
        3.0
    );
    assert_eq!(json["calls"]["requests"]["DeleteItem"], 3);
    assert!(json["cpu_seconds"].as_f64().unwrap() > 0.0);

    let post = |target: &str, body: &str| {
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.{target}\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let (status, body) = http(&sim, &post("Nope", "{}")).await;
    assert_eq!(status, 400);
    assert!(body.contains("UnknownOperationException"), "{body}");
    let (status, body) = http(&sim, &post("Query", "{not json")).await;
    assert_eq!(status, 400);
    assert!(body.contains("SerializationException"), "{body}");
    let (status, body) = http(
        &sim,
        &post(
            "PutItem",
            r#"{"TableName":"bench","Item":{"pk":{"N":"x1"}}}"#,
        ),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains("ValidationException"), "{body}");
    // Answers carry a Date header: precise-ttl reads the store's clock off it.
    let raw = http_raw(&sim, &post("ListTables", "{}")).await;
    assert!(raw.to_ascii_lowercase().contains("\r\ndate: "), "{raw}");
}
