#!/bin/bash
grep -rl 'beacon-5678' /app/candle > /app/tundra_matches.txt
