#!/bin/bash
echo ready > /app/ready
