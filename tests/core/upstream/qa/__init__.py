"""The real thatch's QA use cases (tests/qa/auto/uc-*.ts) of the later design, ported to thatch_core."""
