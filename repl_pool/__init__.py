"""repl_pool: owns Lean processes: a warm pool keyed by environment + header, health, limits."""
