#!/bin/bash
grep -rl 'tulip-4020' /app/anchor > /app/badge_matches.txt
