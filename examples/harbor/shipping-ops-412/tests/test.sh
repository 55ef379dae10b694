#!/bin/bash
# Harbor's verifier: runs after the agent, in a fresh sandbox; writes the reward.
node /tests/check.mjs
