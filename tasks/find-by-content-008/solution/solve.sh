#!/bin/bash
grep -rl 'fox-3304' /app/marble > /app/oasis_matches.txt
