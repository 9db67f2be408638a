#!/bin/bash
grep -rl 'raven-5216' /app/lemon > /app/fox_matches.txt
