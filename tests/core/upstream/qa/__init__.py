"""The real thatch's QA use cases (tests/qa/auto/uc-*.ts), ported to thatch_core."""
