"""Child state → GLMDeployment status (pure: no API calls)."""
