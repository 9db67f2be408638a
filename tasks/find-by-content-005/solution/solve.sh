#!/bin/bash
grep -rl 'fern-2531' /app/lotus > /app/matches.txt
