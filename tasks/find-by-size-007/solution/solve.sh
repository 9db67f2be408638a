#!/bin/bash
find /app/wolf -type f -size +2000c > /app/large.txt
