//! Write capacity and what it costs: the table's write capacity as DynamoDB describes it, the
//! share of it a catch-up may use, and the list prices that turn measured capacity units into
//! dollars.
//!
//! Sources (AWS documentation, read 2026-11-27):
//! - Table quotas: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html>
//!   ("Per table: 40,000 read request units and 40,000 write request units" on demand, by
//!   default).
//! - Prices, US East (N. Virginia): <https://aws.amazon.com/dynamodb/pricing/on-demand/> and
//!   <https://aws.amazon.com/dynamodb/pricing/provisioned/> (on demand since the November 2024
//!   reduction: $0.625 per million write request units, $0.125 per million read request units;
//!   provisioned: $0.00065 per WCU-hour, $0.00013 per RCU-hour). Other regions differ; the
//!   figures are labelled with their region wherever they are shown.

/// AWS's default per-table throughput limit for on-demand tables (write request units/s).
pub const ON_DEMAND_DEFAULT_TABLE_WRITE_UNITS: u64 = 40_000;

/// The share of the table's write capacity a catch-up may use by default (see `run --help` and
/// docs/benchmarks.md, "A good neighbour", for the runs it was chosen on).
pub const DEFAULT_BACKLOG_SHARE: f64 = 0.5;

/// Where the table's write capacity comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WriteCapacity {
    /// Provisioned write capacity units.
    Provisioned(u64),
    /// An on-demand table's configured maximum (`OnDemandThroughput.MaxWriteRequestUnits`).
    OnDemandMax(u64),
    /// An on-demand table without a maximum: AWS's default per-table limit.
    OnDemandDefault,
    /// Given by the user (`--table-write-capacity`).
    Given(u64),
}

impl WriteCapacity {
    /// Write units per second.
    pub fn per_second(self) -> f64 {
        match self {
            WriteCapacity::Provisioned(n)
            | WriteCapacity::OnDemandMax(n)
            | WriteCapacity::Given(n) => n as f64,
            WriteCapacity::OnDemandDefault => ON_DEMAND_DEFAULT_TABLE_WRITE_UNITS as f64,
        }
    }
}

impl std::fmt::Display for WriteCapacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteCapacity::Provisioned(n) => write!(f, "{n} provisioned WCU"),
            WriteCapacity::OnDemandMax(n) => write!(f, "{n} WRU/s (the on-demand maximum)"),
            WriteCapacity::OnDemandDefault => write!(
                f,
                "{ON_DEMAND_DEFAULT_TABLE_WRITE_UNITS} WRU/s (AWS's default per-table limit on demand)"
            ),
            WriteCapacity::Given(n) => write!(f, "{n} write units/s (--table-write-capacity)"),
        }
    }
}

/// The most backlog deletes per second: `share` of the table's write capacity, each delete
/// taking one write unit of the table (items up to 1 KB; larger items cost more, and the
/// refusals they provoke cut the budget below its ceiling).
pub fn backlog_ceiling(capacity: WriteCapacity, share: f64) -> f64 {
    capacity.per_second() * share.clamp(0.0, 1.0)
}

/// Reads a backlog share as users write it: a number above 0 and at most 1, or `off` (`None`).
pub fn parse_share(s: &str) -> Result<Option<f64>, String> {
    if s.trim().eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    match s.trim().parse::<f64>() {
        Ok(share) if share.is_finite() && share > 0.0 && share <= 1.0 => Ok(Some(share)),
        _ => Err(format!(
            "{s:?} is not a share of the table's write capacity: a number above 0 and at most 1 (0.5 is half), or off"
        )),
    }
}

/// List prices of one region, in dollars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    pub region: &'static str,
    /// On demand, per million write request units.
    pub per_million_write_units: f64,
    /// On demand, per million read request units.
    pub per_million_read_units: f64,
    /// Provisioned, per WCU per hour.
    pub per_wcu_hour: f64,
    /// Provisioned, per RCU per hour.
    pub per_rcu_hour: f64,
}

/// US East (N. Virginia), see the module's sources.
pub const US_EAST_1: Prices = Prices {
    region: "us-east-1",
    per_million_write_units: 0.625,
    per_million_read_units: 0.125,
    per_wcu_hour: 0.00065,
    per_rcu_hour: 0.00013,
};

/// What a million expirations cost, from measured capacity units per deleted item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostPerMillion {
    /// On demand: every unit billed as consumed.
    pub on_demand: f64,
    /// Provisioned, at 100 % utilisation (units consumed at exactly the provisioned rate); a
    /// table provisioned with headroom pays for the headroom too, so this is the floor.
    pub provisioned_floor: f64,
}

impl Prices {
    /// The cost of a million expirations that consumed `write_units` and `read_units` per
    /// item (the table's and its indexes' units together, as DynamoDB reports them).
    pub fn per_million(&self, write_units: f64, read_units: f64) -> CostPerMillion {
        let (w, r) = (write_units.max(0.0), read_units.max(0.0));
        let on_demand = w * self.per_million_write_units + r * self.per_million_read_units;
        // A million items at one unit each is a million unit-seconds: 1e6 / 3600 unit-hours.
        let unit_hours = 1e6 / 3600.0;
        let provisioned_floor = unit_hours * (w * self.per_wcu_hour + r * self.per_rcu_hour);
        CostPerMillion {
            on_demand,
            provisioned_floor,
        }
    }

    /// What read units consumed steadily at `reads_per_second` cost per month (730 hours) on
    /// demand: the fixed floor of polling, paid whether or not anything expires.
    pub fn read_floor_per_month(&self, reads_per_second: f64) -> f64 {
        reads_per_second.max(0.0) * 730.0 * 3600.0 / 1e6 * self.per_million_read_units
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_sources() {
        assert_eq!(WriteCapacity::Provisioned(10_000).per_second(), 10_000.0);
        assert_eq!(WriteCapacity::OnDemandDefault.per_second(), 40_000.0);
        assert_eq!(
            backlog_ceiling(WriteCapacity::OnDemandMax(8_000), 0.5),
            4_000.0
        );
        assert_eq!(backlog_ceiling(WriteCapacity::Given(100), 3.0), 100.0);
        assert!(WriteCapacity::OnDemandDefault.to_string().contains("40000"));
    }

    #[test]
    fn a_million_deletes_at_two_write_units_each() {
        // One unit for the table's delete, one for the index's.
        let c = US_EAST_1.per_million(2.0, 0.0);
        assert!((c.on_demand - 1.25).abs() < 1e-9, "{c:?}");
        // 2e6 unit-seconds = 555.6 WCU-hours at $0.00065.
        assert!((c.provisioned_floor - 0.3611).abs() < 1e-3, "{c:?}");
    }

    #[test]
    fn polling_floor() {
        // 32 shards polled once a second at 0.5 RRU each: 16 RRU/s.
        let month = US_EAST_1.read_floor_per_month(16.0);
        assert!((month - 5.256).abs() < 1e-3, "{month}");
    }
}
