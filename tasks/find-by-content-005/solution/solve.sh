#!/bin/bash
grep -rl 'cabin-3574' /app/lotus > /app/clover_matches.txt
