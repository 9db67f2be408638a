#!/bin/bash
grep -rl 'fern-4122' /app/crater > /app/timber_matches.txt
