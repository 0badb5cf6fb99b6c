"""Results: Harbor job export, the results store, the leaderboard, flagged runs, the report."""
