//! The PostgreSQL backend: a `deadpool-postgres` connection pool over `tokio-postgres`
//! (plain TCP; the default build links no TLS stack).
//!
//! Waiting writes run each as one transaction on a pooled connection (many in parallel);
//! queued (`async` durability) writes go through one writer task that commits them in
//! order, in batches. An optional schema name isolates a database user's tables (tests use a
//! fresh `weft_test_<random>` schema per run and drop it afterwards).

use std::error::Error as StdError;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use bytes::BytesMut;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::NoTls;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::error::StoreError;
use crate::schema::{MIGRATIONS, MIGRATIONS_TABLE, SCHEMA_VERSION, postgres_ddl};
use crate::sql::{Backend, Row, SqlValue, Stmt, WriteJob};

/// Options of the PostgreSQL backend.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `postgres://user@host:port/db`.
    pub url: String,
    /// Use (and create) this schema instead of the user's default search path.
    pub schema: Option<String>,
    /// Most pooled connections.
    pub pool_size: usize,
    /// Capacity of the queue of `async` writes.
    pub queue_capacity: usize,
    /// Most queued writes committed in one transaction.
    pub max_batch: usize,
}

impl PgOptions {
    /// Defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        PgOptions {
            url: url.into(),
            schema: None,
            pool_size: 16,
            queue_capacity: 8192,
            max_batch: 256,
        }
    }

    /// Uses `schema` (created when missing).
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }
}

fn valid_schema_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

impl ToSql for SqlValue {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self {
            SqlValue::Null => Ok(IsNull::Yes),
            SqlValue::Int(v) => match *ty {
                Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
                #[allow(clippy::cast_precision_loss)]
                Type::FLOAT8 => (*v as f64).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => v.to_string().to_sql(ty, out),
                Type::BOOL => (*v != 0).to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            SqlValue::Real(v) => v.to_sql(ty, out),
            SqlValue::Text(s) => s.as_str().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn pg_row(row: &tokio_postgres::Row) -> Result<Row, StoreError> {
    let mut values = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let value = match *column.type_() {
            Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(SqlValue::Int),
            Type::INT4 => row
                .try_get::<_, Option<i32>>(i)?
                .map(|v| SqlValue::Int(v.into())),
            Type::INT2 => row
                .try_get::<_, Option<i16>>(i)?
                .map(|v| SqlValue::Int(v.into())),
            Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?.map(SqlValue::Real),
            Type::FLOAT4 => row
                .try_get::<_, Option<f32>>(i)?
                .map(|v| SqlValue::Real(v.into())),
            Type::BOOL => row
                .try_get::<_, Option<bool>>(i)?
                .map(|v| SqlValue::Int(v.into())),
            _ => row.try_get::<_, Option<String>>(i)?.map(SqlValue::Text),
        };
        values.push(value.unwrap_or(SqlValue::Null));
    }
    Ok(Row(values))
}

fn params(stmt: &Stmt) -> Vec<&(dyn ToSql + Sync)> {
    stmt.params
        .iter()
        .map(|p| p as &(dyn ToSql + Sync))
        .collect()
}

async fn run_in_tx(pool: &Pool, jobs: &[&WriteJob]) -> Result<(), StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    for job in jobs {
        if let Some(fence) = &job.fence {
            // FOR UPDATE: a concurrent claim waits until this write committed or failed.
            let row = tx
                .query_opt(
                    "SELECT lease_epoch FROM runs WHERE run_id = $1 FOR UPDATE",
                    &[&fence.run_id],
                )
                .await?;
            let current = row.map(|r| r.try_get::<_, i64>(0)).transpose()?;
            fence.check(current)?;
        }
        for stmt in &job.stmts {
            let prepared = tx.prepare_cached(&stmt.sql).await?;
            tx.execute(&prepared, &params(stmt)).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

enum Job {
    Write(WriteJob),
    Barrier(oneshot::Sender<()>),
}

/// The PostgreSQL backend.
#[derive(Debug)]
pub(crate) struct PgBackend {
    pool: Pool,
    queue: mpsc::Sender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job")
    }
}

impl PgBackend {
    /// Connects, creates the schema when asked, migrates, and starts the writer task.
    pub(crate) async fn open(options: PgOptions) -> Result<Self, StoreError> {
        let mut config: tokio_postgres::Config =
            options
                .url
                .parse()
                .map_err(|e: tokio_postgres::Error| StoreError::InvalidUrl {
                    url: options.url.clone(),
                    reason: e.to_string(),
                })?;
        if let Some(schema) = &options.schema {
            if !valid_schema_name(schema) {
                return Err(StoreError::Invalid(format!(
                    "schema name {schema:?}: use letters, digits and '_'"
                )));
            }
            let (client, connection) = config.connect(NoTls).await?;
            let task = tokio::spawn(connection);
            client
                .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .await?;
            drop(client);
            let _ = task.await;
            config.options(format!("-c search_path={schema}"));
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .build()
            .map_err(|e| StoreError::Postgres(format!("connection pool: {e}")))?;
        migrate(&pool).await?;
        let (queue, rx) = mpsc::channel(options.queue_capacity.max(1));
        tokio::spawn(writer_task(pool.clone(), rx, options.max_batch.max(1)));
        Ok(PgBackend { pool, queue })
    }
}

async fn migrate(pool: &Pool) -> Result<(), StoreError> {
    let mut client = pool.get().await?;
    client.batch_execute(MIGRATIONS_TABLE).await?;
    let tx = client.transaction().await?;
    tx.batch_execute("SELECT pg_advisory_xact_lock(hashtext(current_schema()))")
        .await?;
    let row = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM weft_schema_migrations",
            &[],
        )
        .await?;
    let found: i64 = row.try_get(0)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for m in MIGRATIONS.iter().filter(|m| m.version > found) {
        tx.batch_execute(&postgres_ddl(m.sql))
            .await
            .map_err(|e| StoreError::Migration {
                version: m.version,
                message: StoreError::from(e).to_string(),
            })?;
        tx.execute(
            "INSERT INTO weft_schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &crate::model::now_string()],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn writer_task(pool: Pool, mut rx: mpsc::Receiver<Job>, max_batch: usize) {
    let mut batch = Vec::with_capacity(max_batch);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let writes: Vec<&WriteJob> = batch
            .iter()
            .filter_map(|j| match j {
                Job::Write(w) => Some(w),
                Job::Barrier(_) => None,
            })
            .collect();
        if !writes.is_empty() {
            let result = run_in_tx(&pool, &writes).await;
            if let Err(error) = result {
                tracing::warn!(%error, jobs = writes.len(), "queued batch failed; retrying jobs one by one");
                for job in &writes {
                    if let Err(error) = run_in_tx(&pool, &[job]).await {
                        tracing::warn!(%error, "queued store write failed");
                        if let Some(flag) = &job.failed {
                            flag.store(true, Ordering::SeqCst);
                        }
                    }
                }
            }
        }
        for job in batch.drain(..) {
            if let Job::Barrier(reply) = job {
                let _ = reply.send(());
            }
        }
    }
}

#[async_trait]
impl Backend for PgBackend {
    async fn write(&self, job: WriteJob, wait: bool) -> Result<(), StoreError> {
        if !wait {
            return self
                .queue
                .send(Job::Write(job))
                .await
                .map_err(|_| StoreError::Closed);
        }
        // Read-your-writes and order: earlier queued writes land first.
        self.flush().await?;
        let pool = self.pool.clone();
        let handle = tokio::spawn(async move {
            let result = run_in_tx(&pool, &[&job]).await;
            if result.is_err()
                && let Some(flag) = &job.failed
            {
                flag.store(true, Ordering::SeqCst);
            }
            result
        });
        handle
            .await
            .map_err(|e| StoreError::Postgres(format!("write task failed: {e}")))?
    }

    async fn query(&self, stmt: Stmt) -> Result<Vec<Row>, StoreError> {
        let client = self.pool.get().await?;
        let prepared = client.prepare_cached(&stmt.sql).await?;
        let rows = client.query(&prepared, &params(&stmt)).await?;
        rows.iter().map(pg_row).collect()
    }

    async fn flush(&self) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.queue
            .send(Job::Barrier(reply))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)
    }

    fn run_seq_lock(&self, run_id: &str) -> Option<Stmt> {
        // Under READ COMMITTED two transactions would read the same highest number: a
        // transaction-scoped advisory lock on (schema, run) orders them; the insert that
        // follows reads after the previous holder committed.
        Some(Stmt::new(
            "SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':run_seq'), hashtext($1))",
            vec![run_id.into()],
        ))
    }

    async fn compact(&self) -> Result<(), StoreError> {
        self.flush().await?;
        let client = self.pool.get().await?;
        client
            .batch_execute(
                "VACUUM runs, events, checkpoints, checkpoint_items, checkpoint_threads, tool_calls, \
                 model_responses, agent_lineage, artifacts, threads",
            )
            .await?;
        Ok(())
    }
}

/// Drops `schema` and everything in it (test clean-up).
///
/// # Errors
/// Connection or SQL failures.
pub async fn drop_schema(url: &str, schema: &str) -> Result<(), StoreError> {
    if !valid_schema_name(schema) {
        return Err(StoreError::Invalid(format!("schema name {schema:?}")));
    }
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    let task = tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await?;
    drop(client);
    let _ = task.await;
    Ok(())
}
