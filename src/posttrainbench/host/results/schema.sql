-- The results store's tables, created by store_db.py and described in docs/results-store.md.
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    benchmark TEXT NOT NULL,
    base_model TEXT NOT NULL,
    agent TEXT NOT NULL,
    agent_model TEXT,
    agent_label TEXT NOT NULL,
    job_name TEXT NOT NULL,
    trial_name TEXT NOT NULL,
    task_name TEXT NOT NULL,
    task_version TEXT,
    rescore_of TEXT,
    status TEXT NOT NULL,
    error TEXT,
    score REAL,
    reward REAL,
    flagged INTEGER,
    budget_hours REAL,
    agent_hours REAL,
    cost_usd REAL,
    gpu_hours REAL,
    started_at TEXT,
    finished_at TEXT,
    exported_at TEXT NOT NULL,
    final_model_dir TEXT,
    source_dir TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE verdicts (
    run_id TEXT NOT NULL,
    judge TEXT NOT NULL,
    flagged INTEGER,
    decided_by TEXT NOT NULL,
    justification TEXT NOT NULL
);
CREATE INDEX verdicts_run ON verdicts (run_id);
CREATE TABLE files (
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    size INTEGER NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (run_id, name)
);
CREATE TABLE unreadable (source TEXT PRIMARY KEY, reason TEXT NOT NULL);
