#!/bin/bash
grep -rl 'goblet-1260' /app/anchor > /app/matches.txt
