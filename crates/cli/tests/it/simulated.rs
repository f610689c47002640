//! precise-ttl against the simulated DynamoDB (`precise-ttl-sim`): the simulated bench writes a
//! report with the physical bound, and `status` / `doctor` size the shards from the expiry rate
//! on a table too busy for its 16 shards; `status --metrics-url` shows workers' admission control.

use precise_ttl_sim::{Item, KeySpec, ScalarType, SimConfig, Simulator, TableSpec, Value};

/// `bench --simulated` with integer TTLs: nothing wrong or left, and the report carries the
/// physical bound and our ratio to it.
#[cfg(feature = "bench")]
#[test]
fn a_simulated_bench_reports_the_physical_bound() {
    // It loads both cores: never beside the tests whose timing DynamoDB Local must keep.
    let _alone = crate::support::alone();
    let out = std::env::temp_dir().join(format!("precise-ttl-sim-{:08x}", fastrand::u32(..)));
    assert_cmd::Command::cargo_bin("precise-ttl")
        .unwrap()
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(["bench", "--simulated", "--items", "3000", "--spread", "3s"])
        .args(["--shards", "16", "--ttl-granularity", "1s", "--name", "sim"])
        .arg("--out")
        .arg(&out)
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .success();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sim.json")).unwrap()).unwrap();
    let report = &json["report"];
    assert_eq!(report["wrong"].as_array().unwrap().len(), 0, "{report}");
    assert_eq!(report["left_behind"]["total"], 0);
    assert_eq!(report["counts"]["deleted"], 3000);
    let bound = &report["bound"];
    assert!(bound["p99_ms"].as_f64().unwrap() > 0.0, "{bound}");
    assert!(bound["max_ms"].as_f64().unwrap() > 0.0, "{bound}");
    assert!(bound["ratio_p99"].as_f64().unwrap() > 0.0, "{bound}");
    assert_eq!(
        bound["capacity"]["per_second"], 16_000.0,
        "16 shards × 1,000"
    );
    assert!(json["simulator"]["cpu_seconds"].as_f64().is_some());
    let _ = std::fs::remove_dir_all(&out);
}

/// 800 expirations a second over the next minute on 2 shards: each index partition would take
/// 2 × 400 = 800 write units/s, over the 70 % of its 1,000 the advice plans for. `status` says how
/// many shards to use (ceil(800 × 2 / 700) = 3), and `doctor` reports it as a finding. (The same
/// rule at 8,000/s on 16 shards gives 23: `core::sizing`'s unit test.)
#[test]
fn status_and_doctor_recommend_the_shard_count_for_the_expiry_rate() {
    // Planting 48,000 items keeps a core busy.
    let _heavy = crate::support::shared_blocking();
    let sim = Simulator::start(SimConfig::default().without_latency()).unwrap();
    let setup = |table: &str, args: &[&str]| {
        assert_cmd::Command::cargo_bin("precise-ttl")
            .unwrap()
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args(["--endpoint-url", sim.endpoint(), "--table", table])
            .args(["--shards", "2"])
            .args(args)
            .timeout(std::time::Duration::from_secs(120))
            .assert()
    };
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    // 48,000 items due over a minute that starts once planting is over: 800/s. Planting takes a
    // few seconds, more on a busy machine; a lead that planting ran into is doubled on a table of
    // its own, rather than always waiting out one long enough for the busiest machine.
    let mut lead_s = 6;
    let (table, first) = loop {
        let table = format!("busy-{lead_s}");
        sim.create_table(&TableSpec {
            name: table.clone(),
            partition_key: KeySpec::new("pk", ScalarType::S),
            sort_key: None,
            indexes: Vec::new(),
        })
        .unwrap();
        setup(&table, &["setup", "--no-native-ttl"]).success();
        let first = now_ms() / 1000 + lead_s;
        let items = (0..48_000i64).map(|i| {
            Item::new()
                .with("pk", Value::s(format!("item-{i}")))
                .with("ttl", Value::int(first + i % 60))
                .with("ttl_shard", Value::int(i % 2))
        });
        sim.plant(&table, items).unwrap();
        if now_ms() < first * 1000 - 300 {
            break (table, first);
        }
        assert!(lead_s < 64, "planting 48,000 items took over a minute");
        lead_s *= 2;
    };
    std::thread::sleep(std::time::Duration::from_millis(
        (first * 1000 - 300 - now_ms()).max(0) as u64,
    ));
    let setup = |args: &[&str]| setup(&table, args);

    let status = setup(&["status"]).success();
    let text = crate::support::stdout_of(&status);
    assert!(
        text.contains("expiry rate (800/s)") || text.contains("rate (79"),
        "{text}"
    );
    assert!(text.contains("use >= 3 shards"), "{text}");

    let doctor = setup(&["doctor", "--sample", "500"]).code(predicates::ord::ne(0));
    let text = crate::support::stdout_of(&doctor);
    let err = crate::support::stderr_of(&doctor);
    assert!(text.contains("use >= 3 shards"), "{text}{err}");
    sim.shutdown();
}

/// `status --metrics-url` (here through PRECISE_TTL_METRICS_URL, comma-separated): after the
/// index, each worker's admission controllers from its /metrics (a stand-in page), one line for a
/// worker that does not answer; the command fails, in one line, only when none answers.
#[test]
fn status_shows_each_workers_admission_control_from_its_metrics() {
    let sim = Simulator::start(SimConfig::default().without_latency()).unwrap();
    sim.create_table(&TableSpec {
        name: "watched".into(),
        partition_key: KeySpec::new("pk", ScalarType::S),
        sort_key: None,
        indexes: Vec::new(),
    })
    .unwrap();
    let precise_ttl = || {
        let mut cmd = assert_cmd::Command::cargo_bin("precise-ttl").unwrap();
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args(["--endpoint-url", sim.endpoint(), "--table", "watched"])
            .timeout(std::time::Duration::from_secs(60));
        cmd
    };
    precise_ttl()
        .args(["setup", "--no-native-ttl"])
        .assert()
        .success();
    let worker = crate::deploy::server_at(
        "/metrics",
        Some(concat!(
            "HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\n",
            "# TYPE precise_ttl_concurrency_limit gauge\n",
            "precise_ttl_concurrency_limit 48\n",
            "precise_ttl_table_rate_limit 0\n",
            "precise_ttl_retry_rate_limit 2500\n",
            "precise_ttl_shards_limited 1\n",
            "precise_ttl_shard_rate_limit{shard=\"3\"} 150\n",
            "precise_ttl_throttled_deletes_total{scope=\"index_partition\"} 7\n",
            "precise_ttl_throttled_deletes_total{scope=\"table\"} 0\n",
        )),
    );
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/metrics", l.local_addr().unwrap())
    };
    let out = precise_ttl()
        .env("PRECISE_TTL_METRICS_URL", format!("{worker},{closed}"))
        .arg("status")
        .assert()
        .success();
    let text = crate::support::stdout_of(&out);
    let expected = format!(
        "admission control, from each worker's /metrics:
  {worker}
    requests in flight: at most 48
    table send rate: not engaged
    retry rate: 2500 items/s
    shards under a limit of their own: 1 (3 at 150 items/s)
    throttled deletes: 7 (index_partition 7)
  {closed}: not reachable: "
    );
    assert!(text.contains(&expected), "{text}");
    assert!(text.contains("due and not yet deleted: 0"), "{text}");
    // The same in --json, under "admission", one object per URL in the order given.
    let out = precise_ttl()
        .args(["status", "--json", "--metrics-url", &worker])
        .args(["--metrics-url", &closed])
        .assert()
        .success();
    let json = crate::support::json_of(&out);
    let admission = &json["admission"];
    assert_eq!(admission[0]["url"], worker.as_str(), "{json}");
    assert_eq!(admission[0]["concurrency_limit"], 48.0, "{json}");
    assert_eq!(admission[0]["table_rate_engaged"], false, "{json}");
    assert_eq!(admission[0]["retry_rate_limit"], 2500.0, "{json}");
    assert_eq!(admission[0]["shard_rate_limits"]["3"], 150.0, "{json}");
    assert_eq!(admission[0]["throttled_deletes"]["index_partition"], 7.0);
    assert!(admission[0]["error"].is_null(), "{json}");
    assert!(admission[1]["error"].is_string(), "{json}");
    // Nobody answers: exit 1, one line on standard error, the index still shown.
    let out = precise_ttl()
        .args(["status", "--metrics-url", &closed])
        .assert()
        .code(1);
    let stderr = crate::support::stderr_of(&out);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("no worker answered on /metrics"),
        "{stderr}"
    );
    let text = crate::support::stdout_of(&out);
    assert!(text.contains("due and not yet deleted: 0"), "{text}");
    // Without the flag, nothing of it.
    let out = precise_ttl().arg("status").assert().success();
    let text = crate::support::stdout_of(&out);
    assert!(!text.contains("admission"), "{text}");
    sim.shutdown();
}
