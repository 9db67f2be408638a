#!/bin/bash
grep -rl 'sandal-6313' /app/flint > /app/matches.txt
