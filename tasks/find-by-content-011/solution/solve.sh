#!/bin/bash
grep -rl 'reef-5148' /app/harbor > /app/wolf_matches.txt
