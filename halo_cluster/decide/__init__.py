"""Pure decisions and parsers: plain values in, verdicts out, no pyinfra."""
