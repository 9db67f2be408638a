#!/bin/bash
grep -rl 'magnet-3866' /app/lemon > /app/matches.txt
