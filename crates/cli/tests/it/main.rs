//! Integration tests against a real DynamoDB Local, started once for this test binary (or the
//! one named by `PRECISE_TTL_TEST_ENDPOINT`). Every test works on its own randomly named table,
//! deleted when the test ends.

mod access_denied;
mod adoption;
mod adversarial;
mod archive;
mod archive_crash;
mod archive_s3;
mod chaos;
mod cli;
mod cli_reference;
mod clock;
// `bench --kill-every`: needs the `bench` feature.
#[cfg(feature = "bench")]
mod crash_loop;
mod credentials;
mod daemon;
mod deploy;
mod iam;
mod iam_policy;
mod iam_queue;
mod leases;
mod proxy;
mod queue;
mod queue_cli;
mod read;
mod readme;
mod recorder;
mod recovery;
mod setup;
mod setup_capacity;
mod simulated;
mod stand_in;
mod stop;
mod support;
mod sweep;
mod usage;
