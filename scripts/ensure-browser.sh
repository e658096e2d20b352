#!/usr/bin/env bash
# Headless Chromium and its WebDriver for the browser tests (the HTML report; trialbox view driven through
# Selenium): Debian's chromium and chromium-driver packages.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  echo "chromium: $(chromium --version 2>/dev/null | head -1)"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "error: chromium is missing; install Debian's chromium and chromium-driver" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q chromium chromium-driver >/dev/null
echo "chromium: $(chromium --version 2>/dev/null | head -1)"
