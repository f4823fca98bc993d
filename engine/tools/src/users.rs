//! `ringleader users`: add, delete and list users' SCRAM credentials over the Kafka wire
//! protocol (AlterUserScramCredentials / DescribeUserScramCredentials), as
//! `kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'` /
//! `--delete-config` / `--describe` do (`tools/src/main/java/org/apache/kafka/tools/ConfigCommand.java`).
//!
//! As Kafka's admin client (`clients/src/main/java/org/apache/kafka/clients/admin/KafkaAdminClient.java`,
//! `alterUserScramCredentials`), the salt is drawn here (from the OS) and only the salted
//! password `Hi(password, salt, iterations)` crosses the wire, never the password. A client like
//! `ringleader groups`: it runs against Ringleader or any Kafka broker. Exit codes: 0 ok,
//! 1 failure, 2 bad arguments.

use crate::groups::{error_name, AdminConnection, ApiSpec};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use security::sasl::{salted_password, Mechanism, SCRAM_MIN_ITERATIONS};
use std::io::Write;
use std::time::Duration;
use wire::{Request, Response};

/// `ringleader users`: manage SCRAM users (like kafka-configs.sh --entity-type users).
#[derive(clap::Args, Debug)]
pub struct UsersArgs {
    /// Broker to connect to, host:port.
    #[arg(long, alias = "bootstrap", default_value = "127.0.0.1:9092")]
    pub bootstrap_server: String,
    /// Add (or replace) USER's credential for --mechanism with --password.
    #[arg(long, value_name = "USER")]
    pub add: Option<String>,
    /// Delete USER's credential for --mechanism.
    #[arg(long, value_name = "USER")]
    pub delete: Option<String>,
    /// List every user's SCRAM mechanisms and iterations (or only --user's).
    #[arg(long)]
    pub list: bool,
    /// With --list: only this user.
    #[arg(long)]
    pub user: Option<String>,
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long)]
    pub mechanism: Option<String>,
    /// With --add: the password.
    #[arg(long)]
    pub password: Option<String>,
    /// With --add: PBKDF2 iterations (Kafka's default 4096; 4096-16384).
    #[arg(long, default_value_t = 4096)]
    pub iterations: u32,
    /// Timeout for connecting and for each request.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
}

const DESCRIBE: ApiSpec = ApiSpec {
    key: 50,
    name: "DescribeUserScramCredentials",
    min: 0,
    max: 0,
};
const ALTER: ApiSpec = ApiSpec {
    key: 51,
    name: "AlterUserScramCredentials",
    min: 0,
    max: 0,
};

pub fn run(args: &UsersArgs, out: &mut dyn Write) -> i32 {
    let code = match (&args.add, &args.delete, args.list) {
        (Some(user), None, false) => match (args.mechanism.as_deref(), &args.password) {
            (Some(m), Some(pw)) => add(args, user, m, pw, out),
            _ => usage(out, "--add needs --mechanism and --password"),
        },
        (None, Some(user), false) => match args.mechanism.as_deref() {
            Some(m) => delete(args, user, m, out),
            None => usage(out, "--delete needs --mechanism"),
        },
        (None, None, true) => list(args, out),
        _ => usage(out, "give one of --add, --delete or --list"),
    };
    let _ = out.flush();
    code
}

fn usage(out: &mut dyn Write, what: &str) -> i32 {
    let _ = writeln!(
        out,
        "Error: {what}\nTry 'ringleader users --help' for usage."
    );
    2
}

fn scram_mechanism(name: &str) -> Result<Mechanism, String> {
    Mechanism::from_name(name)
        .filter(|m| m.is_scram())
        .ok_or_else(|| format!("unknown SCRAM mechanism {name} (SCRAM-SHA-256 or SCRAM-SHA-512)"))
}

fn connect(args: &UsersArgs) -> Result<AdminConnection, String> {
    let timeout = Duration::from_millis(args.timeout_ms.clamp(1, 86_400_000));
    AdminConnection::connect(&args.bootstrap_server, timeout, "ringleader-users")
        .map_err(|e| e.message)
}

fn report(out: &mut dyn Write, result: Result<String, String>) -> i32 {
    match result {
        Ok(line) => {
            let _ = writeln!(out, "{line}");
            0
        }
        Err(e) => {
            let _ = writeln!(out, "Error: {e}");
            1
        }
    }
}

fn alter(
    args: &UsersArgs,
    req: AlterUserScramCredentialsRequest,
    user: &str,
) -> Result<String, String> {
    let mut c = connect(args)?;
    let v = c.require(ALTER).map_err(|e| e.message)?;
    let resp = match c
        .call(v, &Request::AlterUserScramCredentials(req))
        .map_err(|e| e.message)?
    {
        Response::AlterUserScramCredentials(r) => r,
        _ => {
            return Err(
                "the broker answered AlterUserScramCredentials with another response".into(),
            )
        }
    };
    match resp.results.iter().find(|r| r.user.as_str() == user) {
        Some(r) if r.error_code == 0 => Ok(format!("Completed updating config for user {user}.")),
        Some(r) => Err(format!(
            "{}: {}",
            error_name(r.error_code),
            r.error_message.as_deref().unwrap_or("")
        )),
        None => Err(format!("the broker's answer has no result for user {user}")),
    }
}

fn add(args: &UsersArgs, user: &str, mechanism: &str, password: &str, out: &mut dyn Write) -> i32 {
    let result = (|| {
        let m = scram_mechanism(mechanism)?;
        // ConfigCommand refuses too few iterations before asking the broker, with this message.
        if args.iterations < SCRAM_MIN_ITERATIONS {
            return Err(format!(
                "Iterations {} is less than the minimum {SCRAM_MIN_ITERATIONS} required for {mechanism}",
                args.iterations
            ));
        }
        // 32 random bytes, as Kafka's ScramFormatter.secureRandomBytes for a new credential.
        let mut salt = [0u8; 32];
        getrandom::getrandom(&mut salt).map_err(|e| format!("cannot draw a salt: {e}"))?;
        let salted = salted_password(m, password.as_bytes(), &salt, args.iterations)
            .map_err(|e| e.to_string())?;
        let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
            ScramCredentialUpsertion::default()
                .with_name(StrBytes::from_string(user.to_string()))
                .with_mechanism(m.scram_type().unwrap_or_default())
                .with_iterations(args.iterations as i32)
                .with_salt(bytes::Bytes::copy_from_slice(&salt))
                .with_salted_password(bytes::Bytes::from(salted)),
        ]);
        alter(args, req, user)
    })();
    report(out, result)
}

fn delete(args: &UsersArgs, user: &str, mechanism: &str, out: &mut dyn Write) -> i32 {
    let result = (|| {
        let m = scram_mechanism(mechanism)?;
        let req = AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(StrBytes::from_string(user.to_string()))
                .with_mechanism(m.scram_type().unwrap_or_default()),
        ]);
        alter(args, req, user)
    })();
    report(out, result)
}

fn list(args: &UsersArgs, out: &mut dyn Write) -> i32 {
    let result = (|| -> Result<Vec<String>, String> {
        let mut c = connect(args)?;
        let v = c.require(DESCRIBE).map_err(|e| e.message)?;
        let users = args
            .user
            .as_ref()
            .map(|u| vec![UserName::default().with_name(StrBytes::from_string(u.clone()))]);
        let resp = match c
            .call(
                v,
                &Request::DescribeUserScramCredentials(
                    DescribeUserScramCredentialsRequest::default().with_users(users),
                ),
            )
            .map_err(|e| e.message)?
        {
            Response::DescribeUserScramCredentials(r) => r,
            _ => {
                return Err(
                    "the broker answered DescribeUserScramCredentials with another response".into(),
                )
            }
        };
        if resp.error_code != 0 {
            return Err(format!(
                "{}: {}",
                error_name(resp.error_code),
                resp.error_message.as_deref().unwrap_or("")
            ));
        }
        let mut lines = Vec::new();
        let mut results = resp.results;
        results.sort_by(|a, b| a.user.cmp(&b.user));
        for r in results {
            if r.error_code != 0 {
                // kafka-configs prints nothing for a user without credentials; say why here.
                lines.push(format!(
                    "No SCRAM credentials for user-principal '{}' ({})",
                    r.user.as_str(),
                    error_name(r.error_code)
                ));
                continue;
            }
            let creds: Vec<String> = r
                .credential_infos
                .iter()
                .map(|i| {
                    let name = Mechanism::from_scram_type(i.mechanism)
                        .map(|m| m.name().to_string())
                        .unwrap_or_else(|| format!("UNKNOWN({})", i.mechanism));
                    format!("{name}=iterations={}", i.iterations)
                })
                .collect();
            lines.push(format!(
                "SCRAM credential configs for user-principal '{}' are {}",
                r.user.as_str(),
                creds.join(", ")
            ));
        }
        Ok(lines)
    })();
    match result {
        Ok(lines) => {
            for l in lines {
                let _ = writeln!(out, "{l}");
            }
            0
        }
        Err(e) => {
            let _ = writeln!(out, "Error: {e}");
            1
        }
    }
}
