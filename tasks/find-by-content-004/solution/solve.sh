#!/bin/bash
grep -rl 'mesa-7632' /app/flint > /app/panda_matches.txt
