#!/bin/bash
# The oracle: the threshold of the business rule (39 EUR).
set -euo pipefail
sed -i 's/FREE_SHIPPING_THRESHOLD = 50;/FREE_SHIPPING_THRESHOLD = 39;/' src/shipping.mjs
